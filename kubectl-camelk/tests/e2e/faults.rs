//! An API server that fails: a fault injector on loopback in front of the
//! real test API server (not a mock). It forwards every request to the real
//! server (as the admin client), except the LIST of Integrations, which it
//! answers with a 500 or cuts mid-body. `get` and `plan` must fail with a
//! clear message and exit 1 (`diff`: 2), in bounded time, and write nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::CamelKind;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{repo_with, shared_namespace};

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `500 Internal Server Error` with a Kubernetes `Status` body.
    Status500,
    /// The real answer's headers (its full `Content-Length`), then half its
    /// body, then the connection closed.
    Truncated,
}

/// Requests the proxy saw: method and path.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Starts the proxy; returns its URL and what it sees.
async fn proxy(upstream: Client, fault: Fault) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (upstream, log) = (upstream.clone(), log.clone());
            tokio::spawn(async move {
                let _ = serve_one(stream, &upstream, fault, &log).await;
            });
        }
    });
    (url, seen)
}

/// One request per connection (answers say `Connection: close`).
async fn serve_one(
    stream: TcpStream,
    upstream: &Client,
    fault: Fault,
    seen: &Seen,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
    );
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).await?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            if name == "content-length" {
                length = value.parse().unwrap_or(0);
            }
            headers.push((name, value));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    seen.lock().unwrap().push((method.clone(), target.clone()));
    let path = target.split('?').next().unwrap_or_default();
    let list_of_integrations = method == "GET" && path.ends_with("/integrations");

    let mut stream = reader.into_inner();
    if list_of_integrations && matches!(fault, Fault::Status500) {
        let status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "etcdserver: request timed out", "reason": "InternalError", "code": 500
        })
        .to_string();
        let answer = format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{status}",
            status.len()
        );
        return stream.write_all(answer.as_bytes()).await;
    }

    let mut request = http::Request::builder()
        .method(method.as_str())
        .uri(&target);
    for (name, value) in &headers {
        // The admin client authenticates; hop-by-hop headers stay here.
        if !matches!(
            name.as_str(),
            "host" | "authorization" | "connection" | "content-length" | "transfer-encoding"
        ) {
            request = request.header(name, value);
        }
    }
    let request = request.body(kube::client::Body::from(body)).unwrap();
    let response = upstream
        .send(request)
        .await
        .expect("the real API server answers");
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let bytes = response.into_body().collect_bytes().await.unwrap();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        bytes.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if list_of_integrations && matches!(fault, Fault::Truncated) {
        stream.write_all(&bytes[..bytes.len() / 2]).await?;
        stream.flush().await?;
        // Closed here, half-way through what the headers promised.
        return Ok(());
    }
    stream.write_all(&bytes).await
}

fn integrations(client: Client, ns: &str) -> Api<DynamicObject> {
    camelk_testkit::scenario::camel_api(client, CamelKind::Integration, ns)
}

/// Names and resourceVersions: any write changes them.
async fn snapshot(api: &Api<DynamicObject>) -> Vec<(String, String)> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.unwrap_or_default(),
                o.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_server_answering_500_or_a_truncated_list_fails_the_command_cleanly() {
    let (_, ns, admin) = shared_namespace("faults").await;
    let api = integrations(admin.clone(), &ns.name);
    for name in ["orders", "billing", "canary-a"] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
            "metadata": { "name": name, "labels": { "camel.apache.org/operator.id": "operator-1" } },
            "spec": {}
        }))
        .unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let before = snapshot(&api).await;
    let manifest = format!(
        "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: shop\nspec:\n  operators:\n    - id: operator-1\n      namespace: camel-k\n    - id: operator-2\n      namespace: camel-k\n  scope:\n    namespaces: [{}]\n  defaultOperator: operator-2\n",
        ns.name
    );
    let repo = repo_with(&manifest);

    for (fault, message) in [
        (Fault::Status500, "etcdserver: request timed out"),
        (
            Fault::Truncated,
            "error reading a body from connection: end of file before message length reached",
        ),
    ] {
        let (url, seen) = proxy(admin.clone(), fault).await;
        let kubeconfig = repo.path().join("..").join(format!(
            "{}-kubeconfig",
            repo.path().file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: {url}\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n    namespace: {}\nusers:\n- name: u\n  user:\n    token: ignored-by-the-proxy\n",
                ns.name
            ),
        )
        .unwrap();
        for (args, code) in [(&["get"][..], 1), (&["plan"][..], 1), (&["diff"][..], 2)] {
            let started = Instant::now();
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-camelk"));
            command
                .current_dir(repo.path())
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--request-timeout", "10s"])
                .args(args)
                .env_remove("KUBECONFIG")
                .env("NO_COLOR", "1");
            let output = tokio::task::spawn_blocking(move || command.output().unwrap())
                .await
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(code),
                "{fault:?} {args:?}: {stderr}"
            );
            assert!(stderr.contains(message), "{fault:?} {args:?}: {stderr}");
            // Which step failed: the list, of Camel K resources.
            assert!(
                stderr.contains("error: listing "),
                "{fault:?} {args:?}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{fault:?} {args:?}: {stderr}");
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{fault:?} {args:?} took {:?}",
                started.elapsed()
            );
        }
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.iter().any(|(_, path)| path.contains("/integrations")),
            "the proxy saw no list: {seen:?}"
        );
        assert!(
            seen.iter().all(|(method, _)| method == "GET"),
            "{fault:?}: a write went through: {seen:?}"
        );
    }
    assert_eq!(snapshot(&api).await, before, "an object changed");
}
