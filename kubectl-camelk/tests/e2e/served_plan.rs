//! `kubectl camelk plan --server`: the plan the reconciler serves from its
//! watch cache (`GET /plan`) against the plan computed here from the
//! cluster, on the real control plane, and the endpoint's bearer token.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use camelk_reconciler::api::OperatorAssignment;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{MANIFEST, git, live_camelk_as, repo_with};
use crate::live_sync::{install_crd, manifest, start_sync_serving, wait_applied};

const TOKEN: &str = "plan-token-0123456789";

/// The plugin as a CI job runs it: no kubeconfig, no checkout.
fn without_cluster(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-camelk"));
    cmd.current_dir(dir)
        .env("KUBECONFIG", dir.join("no-kubeconfig"))
        .env_remove("CAMELK_PLAN_TOKEN")
        .env("NO_COLOR", "1");
    cmd
}

fn json_of(out: &std::process::Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The status line of a plain `GET path` on `addr`, with no credentials.
fn status_line(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_plan_equals_the_local_plan_and_needs_the_token() {
    let cluster = camelk_testkit::shared();
    cluster.grant_camelk_roles().await;
    let admin = cluster.admin().await;
    install_crd(&admin).await;
    let ns = cluster.namespace("served-plan").await;
    cluster.grant_sync_namespace(&ns.name).await;
    let integrations: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        &ns.name,
        &CamelKind::Integration.api_resource(),
    );
    for name in ["a", "b", "c", "d"] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(), "kind": "Integration",
            "metadata": { "name": name, "labels": { OPERATOR_ID_KEY: "operator-1" }, "annotations": { OPERATOR_ID_KEY: "operator-1" } },
            "spec": {}
        }))
        .unwrap();
        integrations
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }

    // main: everything with operator-1; a pull request's branch moves it all
    // to operator-2 in two steps.
    let repo = repo_with(&manifest(&ns.name, None));
    git(repo.path(), &["checkout", "-qb", "feature"]);
    std::fs::write(
        repo.path().join(MANIFEST),
        manifest(&ns.name, Some(&["50%", "100%"])),
    )
    .unwrap();
    git(
        repo.path(),
        &["commit", "-qam", "move everything to operator-2"],
    );
    let head_sha = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_string();
    git(repo.path(), &["checkout", "-q", "main"]);

    let scratch = tempfile::tempdir().unwrap();
    let token_file = scratch.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}");
    let stop = CancellationToken::new();
    let sync = start_sync_serving(
        cluster,
        &ns.name,
        repo.path(),
        &scratch.path().join("cache"),
        &stop,
        Some((listener, token_file.clone())),
    )
    .await;
    let assignments: Api<OperatorAssignment> = Api::namespaced(admin.clone(), &ns.name);
    wait_applied(
        &assignments,
        git(repo.path(), &["rev-parse", "main"]).trim(),
    )
    .await;

    let kubeconfig = cluster.kubeconfig();
    let local = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .current_dir(repo.path())
        .args(["plan", "--base", "main", "--head", "feature", "-o", "json"])
        .output()
        .unwrap();
    let local = json_of(&local, "plan --base main --head feature");
    assert_eq!(
        local["batches"].as_array().map(Vec::len),
        Some(2),
        "two steps: {local:#}"
    );

    let elsewhere = tempfile::tempdir().unwrap();
    let served = |head: &str, token: &str| {
        without_cluster(elsewhere.path())
            .args(["-n", &ns.name, "plan", "--server", &url])
            .args(["--base", "main", "--head", head, "-o", "json"])
            .env("CAMELK_PLAN_TOKEN", token)
            .output()
            .unwrap()
    };
    let by_branch = json_of(&served("feature", TOKEN), "plan --server, head a branch");
    assert_eq!(by_branch, local, "served and local plans differ");
    let by_sha = json_of(&served(&head_sha, TOKEN), "plan --server, head a SHA");
    assert_eq!(by_sha, local);
    let from_file = without_cluster(elsewhere.path())
        .args(["-n", &ns.name, "plan", "--server", &url, "--token-file"])
        .arg(&token_file)
        .args(["--base", "main", "--head", "feature", "-o", "markdown"])
        // Small enough to leave rows out, and say how to see them all.
        .args(["--max-bytes", "500"])
        .output()
        .unwrap();
    assert!(
        from_file.status.success(),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    let comment = String::from_utf8(from_file.stdout).unwrap();
    assert!(
        comment.contains(&format!(
            "kubectl-camelk:plan {} -->",
            crate::live_sync::NAME
        )),
        "the comment's marker names the assignment:\n{comment}"
    );
    assert!(comment.contains(&format!("--server {url}")), "{comment}");

    // Refused: a wrong token, no token, an unknown branch, a revision that
    // is not one.
    let wrong = served("feature", "not-the-token");
    assert_eq!(wrong.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("wrong bearer token"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(TOKEN),
        "the token is never shown: {stderr}"
    );
    assert!(
        status_line(addr, "/plan?head=feature").contains(" 401 "),
        "without a token"
    );
    let unknown = served("no-such-branch", TOKEN);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && stderr.contains("404"),
        "{stderr}"
    );
    let invalid = served("main..feature", TOKEN);
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert!(
        !invalid.status.success() && stderr.contains("400") && stderr.contains("not a revision"),
        "{stderr}"
    );

    stop.cancel();
    sync.join().unwrap();
}
