//! The sync's HTTP endpoints: `/healthz`, `/readyz`, `/metrics` and the Git
//! webhook `POST /hooks/git`.
//!
//! Contract:
//! - `/healthz` answers 200 while the process serves; `/readyz` answers 200
//!   with `leader` or `standby`.
//! - `/metrics` is the Prometheus text format of [`Telemetry`]
//!   (`prometheus-client`).
//! - `POST /hooks/git` is accepted only when the request carries a valid
//!   HMAC-SHA256 of its body under the configured secret
//!   ([`verify_signature`]): GitHub's `X-Hub-Signature-256: sha256=<hex>` or
//!   Gitea's `X-Gitea-Signature: <hex>`. Without a configured secret the hook
//!   is refused (404); a missing or wrong signature is refused (401). The
//!   signature is compared in constant time; neither it nor the secret is
//!   logged. A body over [`MAX_WEBHOOK_BODY_BYTES`] is refused (413) before
//!   it is read whole: at once from its `Content-Length`, else as soon as
//!   that many bytes have come.
//! - `GET /plan?head=REV&base=REV` answers the plan of a pull request, with
//!   a bearer token, on the leader only ([`super::plan_endpoint`]).
//!
//! # Replicas
//! Every replica serves and is ready, and the Service sends each request to
//! any of them; only the leader acts:
//! - An accepted webhook on the leader wakes its loop: it fetches at once
//!   (202 `fetching`). On a standby it is passed on ([`Relay`]): the standby
//!   sets `camelk.dev/reconcile-requested-at` to the current time on the
//!   `OperatorAssignment` the sync follows (with `--source cluster`, the
//!   object `--name`; with a Git source, every object in `--namespace` that
//!   the sync has applied), the annotation `kubectl camelk sync` sets. The
//!   leader watches it ([`super::owner_watch::watch_assignments`]) and starts a
//!   round at once, which copies the value to `status.lastHandledReconcileAt`.
//!   The answer is 202 naming the objects. When nothing can be written (no
//!   object applied yet, the API server refused), 503 with `Retry-After`,
//!   so the Git host shows a failed delivery instead of a silent loss; the
//!   leader's next interval fetches anyway.
//! - `GET /plan` on a standby answers 503 with `Retry-After` after checking
//!   the token: its watch cache is cold, and a retry through the Service
//!   reaches the leader.
//!
//! Why a standby stays ready: taking it out of the Service's endpoints
//! (`/readyz` failing) would also make a Deployment's rolling update wait
//! forever for its new pods to become ready (only one of them can lead), and
//! a PodDisruptionBudget count it as unavailable. Readiness says the
//! process serves, not that it leads.
//!
//! # RBAC
//! The standby's write is a merge patch of the object's annotations (`patch`
//! on `operatorassignments`; with `--source cluster` the Role names the one
//! object); with a Git source it lists the objects (`list`) to find those the
//! sync applied.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, KeyInit, Mac};
use kube::api::{Api, ListParams, Patch};
use kube::{Client, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sha2::Sha256;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::RECONCILE_REQUEST_ANNOTATION;
use super::plan_endpoint::{PlanQuery, PlanService, serve_plan};
use super::status::FIELD_MANAGER;
use crate::api::OperatorAssignment;
use crate::field_manager::update_as;
use crate::lock::Leadership;

/// The `Retry-After` (seconds) of a request a standby cannot serve or pass
/// on: a retry through the Service may reach the leader, or find the
/// object applied.
pub(crate) const STANDBY_RETRY_AFTER_SECS: u64 = 1;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OperatorLabel {
    pub(crate) operator: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub(crate) kind: String,
}

/// The sync's Prometheus metrics.
pub(crate) struct Telemetry {
    registry: Registry,
    /// `camelk_resources{operator}`: governed resources per current owner.
    pub(crate) resources: Family<OperatorLabel, Gauge>,
    /// `camelk_handoffs_in_progress`: handoffs (one per namespace, source and
    /// target) being driven now.
    pub(crate) handoffs_in_progress: Gauge,
    /// `camelk_handoff_duration_seconds`: from request to the last flip.
    pub(crate) handoff_duration: Histogram,
    /// `camelk_sync_duration_seconds`: one round, fetch to record.
    pub(crate) sync_duration: Histogram,
    /// `camelk_sync_errors_total{kind}`: failed rounds by the step that failed.
    pub(crate) errors: Family<KindLabel, Counter>,
}

impl Default for Telemetry {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("camelk");
        let resources = Family::<OperatorLabel, Gauge>::default();
        let handoffs_in_progress = Gauge::default();
        let handoff_duration = Histogram::new(exponential_buckets(0.25, 2.0, 12));
        let sync_duration = Histogram::new(exponential_buckets(0.05, 2.0, 14));
        let errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "resources",
            "Governed Camel K resources per current owner",
            resources.clone(),
        );
        registry.register(
            "handoffs_in_progress",
            "Handoffs being driven now",
            handoffs_in_progress.clone(),
        );
        registry.register(
            "handoff_duration_seconds",
            "Duration of one handoff, request to last flip",
            handoff_duration.clone(),
        );
        registry.register(
            "sync_duration_seconds",
            "Duration of one sync round",
            sync_duration.clone(),
        );
        registry.register(
            "sync_errors",
            "Failed sync rounds by the step that failed",
            errors.clone(),
        );
        Telemetry {
            registry,
            resources,
            handoffs_in_progress,
            handoff_duration,
            sync_duration,
            errors,
        }
    }
}

impl Telemetry {
    /// The Prometheus text exposition.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// The largest webhook body read: 1 MiB.
///
/// Why this value: the body is only hashed (its HMAC is the signature), never
/// parsed, and every request is read before it can be authenticated, so the
/// limit bounds what anyone who can reach the port makes the reconciler
/// hold. A push event lists at most 20 commits (GitHub, Gitea), a few tens of
/// kilobytes; 1 MiB is far above that. A refused hook costs nothing but
/// speed: the next poll (`--interval`) fetches anyway.
pub(crate) const MAX_WEBHOOK_BODY_BYTES: usize = 1024 * 1024;

/// Why a webhook request is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Neither signature header is present.
    #[error("no X-Hub-Signature-256 or X-Gitea-Signature header")]
    Missing,
    /// The header is not `sha256=<hex>` (GitHub) or `<hex>` (Gitea).
    #[error("the signature header is not `sha256=<hex>` or `<hex>`")]
    Malformed,
    /// The signature is not the body's HMAC under the secret.
    #[error("the signature does not match the body")]
    Mismatch,
}

/// Checks the HMAC-SHA256 signature of `body` under `secret` in GitHub's or
/// Gitea's header.
pub fn verify_signature(
    secret: &[u8],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), SignatureError> {
    // A header that is there but not text is malformed, not missing.
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().map_err(|_| SignatureError::Malformed))
            .transpose()
    };
    let hex_signature = match (header("x-hub-signature-256")?, header("x-gitea-signature")) {
        (Some(github), _) => github
            .strip_prefix("sha256=")
            .ok_or(SignatureError::Malformed)?,
        (None, gitea) => gitea?.ok_or(SignatureError::Missing)?,
    };
    let signature = hex::decode(hex_signature.trim()).map_err(|_| SignatureError::Malformed)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    mac.verify_slice(&signature)
        .map_err(|_| SignatureError::Mismatch)
}

/// Which `OperatorAssignment`s a standby asks for a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RelayTarget {
    /// The object the sync reads (`--source cluster --name`).
    Named(String),
    /// Every object the sync applied from Git: its `managedFields` hold a
    /// server-side apply of [`FIELD_MANAGER`] to the object itself (not its
    /// status). Only one sync leads per namespace (one lock), so these are
    /// its objects.
    AppliedBySync,
}

/// Why a standby could not pass a webhook on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayError {
    #[error("listing the OperatorAssignments in {namespace}: {source}")]
    List {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("the sync has applied no OperatorAssignment in {namespace} yet")]
    NothingApplied { namespace: String },
    #[error("asking OperatorAssignment {namespace}/{name} for a round: {source}")]
    Patch {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Passes a webhook a standby accepted on to the leader, through the
/// annotation the leader watches (see the module doc).
pub(crate) struct Relay {
    client: Client,
    namespace: String,
    target: RelayTarget,
}

impl Relay {
    /// Relays to `target` among the `OperatorAssignment`s of `namespace`.
    pub(crate) fn new(client: Client, namespace: &str, target: RelayTarget) -> Relay {
        Relay {
            client,
            namespace: namespace.to_string(),
            target,
        }
    }

    /// Sets the requested-at annotation of each target to now; the names.
    pub(crate) async fn pass_on(&self) -> Result<Vec<String>, RelayError> {
        let api: Api<OperatorAssignment> = Api::namespaced(self.client.clone(), &self.namespace);
        let names = match &self.target {
            RelayTarget::Named(name) => vec![name.clone()],
            RelayTarget::AppliedBySync => {
                let objects =
                    api.list_metadata(&ListParams::default())
                        .await
                        .map_err(|source| RelayError::List {
                            namespace: self.namespace.clone(),
                            source,
                        })?;
                objects
                    .items
                    .iter()
                    .filter(|o| applied_by_sync(&o.metadata))
                    .map(|o| o.name_any())
                    .collect()
            }
        };
        if names.is_empty() {
            return Err(RelayError::NothingApplied {
                namespace: self.namespace.clone(),
            });
        }
        // A fresh value each time: the leader wakes on a change only.
        let requested = k8s_openapi::jiff::Timestamp::now().to_string();
        let patch = Patch::Merge(serde_json::json!({
            "metadata": { "annotations": { RECONCILE_REQUEST_ANNOTATION: requested } }
        }));
        for name in &names {
            api.patch(name, &update_as(FIELD_MANAGER), &patch)
                .await
                .map_err(|source| RelayError::Patch {
                    namespace: self.namespace.clone(),
                    name: name.clone(),
                    source,
                })?;
        }
        Ok(names)
    }
}

/// Whether the sync applied the object (a server-side apply of its
/// manager to the main resource), as it does from a Git source.
fn applied_by_sync(meta: &kube::api::ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref() == Some(FIELD_MANAGER)
            && entry.operation.as_deref() == Some("Apply")
            && entry.subresource.as_deref().unwrap_or_default().is_empty()
    })
}

/// What the endpoints share with the sync loop.
#[derive(Clone)]
pub(crate) struct Endpoints {
    pub(crate) telemetry: Arc<Telemetry>,
    /// Notified by a valid webhook on the leader: the loop fetches at once.
    pub(crate) trigger: Arc<Notify>,
    pub(crate) webhook_secret: Option<Arc<Vec<u8>>>,
    pub(crate) leadership: Leadership,
    /// How a standby passes a valid webhook on to the leader.
    pub(crate) relay: Arc<Relay>,
    /// The plan endpoint, when a token is configured.
    pub(crate) plan: Option<Arc<PlanService>>,
}

/// Serves the endpoints on `listener` until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route(
            "/hooks/git",
            post(hook).layer(DefaultBodyLimit::max(MAX_WEBHOOK_BODY_BYTES)),
        )
        .route("/plan", get(plan))
        .with_state(endpoints);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn readyz(State(e): State<Endpoints>) -> &'static str {
    if e.leadership.is_leading() {
        "leader"
    } else {
        "standby"
    }
}

async fn metrics(State(e): State<Endpoints>) -> ([(&'static str, &'static str); 1], String) {
    (
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        e.telemetry.encode(),
    )
}

async fn plan(
    State(e): State<Endpoints>,
    headers: HeaderMap,
    Query(query): Query<PlanQuery>,
) -> Response {
    serve_plan(e.plan.clone(), &headers, &query).await
}

async fn hook(State(e): State<Endpoints>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(secret) = &e.webhook_secret else {
        return (
            StatusCode::NOT_FOUND,
            "no webhook secret configured\n".to_string(),
        )
            .into_response();
    };
    if let Err(why) = verify_signature(secret, &headers, &body) {
        tracing::warn!(reason = %why, "webhook refused");
        return (StatusCode::UNAUTHORIZED, format!("{why}\n")).into_response();
    }
    if e.leadership.is_leading() {
        tracing::info!("webhook accepted; fetching now");
        e.trigger.notify_one();
        return (StatusCode::ACCEPTED, "fetching\n".to_string()).into_response();
    }
    match e.relay.pass_on().await {
        Ok(names) => {
            tracing::info!(objects = ?names, "webhook accepted on a standby; passed on to the leader");
            (
                StatusCode::ACCEPTED,
                format!(
                    "standby: asked the leader for a round through OperatorAssignment {}\n",
                    names.join(", ")
                ),
            )
                .into_response()
        }
        Err(why) => {
            tracing::warn!(error = %why, "webhook accepted on a standby but not passed on");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, STANDBY_RETRY_AFTER_SECS.to_string())],
                format!("standby: could not pass the webhook on to the leader: {why}\n"),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &[u8], body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn github_and_gitea_signatures_are_checked() {
        let body = br#"{"ref":"refs/heads/main"}"#;
        let good = sign(b"s3cret", body);
        let mut github = HeaderMap::new();
        github.insert(
            "x-hub-signature-256",
            format!("sha256={good}").parse().unwrap(),
        );
        assert_eq!(verify_signature(b"s3cret", &github, body), Ok(()));
        assert_eq!(
            verify_signature(b"other", &github, body),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"s3cret", &github, b"tampered"),
            Err(SignatureError::Mismatch)
        );
        let mut gitea = HeaderMap::new();
        gitea.insert("x-gitea-signature", good.parse().unwrap());
        assert_eq!(verify_signature(b"s3cret", &gitea, body), Ok(()));
        let mut bare = HeaderMap::new();
        bare.insert("x-hub-signature-256", good.parse().unwrap());
        assert_eq!(
            verify_signature(b"s3cret", &bare, body),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify_signature(b"s3cret", &HeaderMap::new(), body),
            Err(SignatureError::Missing)
        );
    }

    /// The real router on a loopback port, with a webhook secret, leading
    /// or standing by; its API server does not answer (port 9), so a
    /// standby cannot pass a webhook on.
    async fn serving(leading: bool) -> (std::net::SocketAddr, Arc<Notify>, CancellationToken) {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let trigger = Arc::new(Notify::new());
        let endpoints = Endpoints {
            telemetry: Arc::new(Telemetry::default()),
            trigger: trigger.clone(),
            webhook_secret: Some(Arc::new(b"s3cret".to_vec())),
            leadership: Leadership::fixed(leading),
            relay: Arc::new(Relay::new(
                client,
                "default",
                RelayTarget::Named("camel-k".into()),
            )),
            plan: None,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        tokio::spawn(serve(listener, endpoints, shutdown.clone()));
        (address, trigger, shutdown)
    }

    /// Sends a POST /hooks/git whose body is `size` bytes of `x` (chunked
    /// when `chunked`, else with its Content-Length), correctly signed, and
    /// stops writing once the answer comes. Returns the head of the answer
    /// (status line and headers) and how many body bytes were written by then.
    async fn post_hook(
        address: std::net::SocketAddr,
        size: usize,
        chunked: bool,
    ) -> (String, usize) {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        const CHUNK: usize = 64 * 1024;
        let stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let (read, mut write) = stream.into_split();
        let chunk = vec![b'x'; CHUNK];
        // Signed as a real hook would be (a body over the limit is refused
        // before the signature matters: not worth hashing 100 MB).
        let signature = if size <= 2 * MAX_WEBHOOK_BODY_BYTES {
            sign(b"s3cret", &vec![b'x'; size])
        } else {
            "00".repeat(32)
        };
        let length = if chunked {
            "Transfer-Encoding: chunked".to_string()
        } else {
            format!("Content-Length: {size}")
        };
        let head = format!(
            "POST /hooks/git HTTP/1.1\r\nHost: x\r\n{length}\r\n\
             X-Hub-Signature-256: sha256={signature}\r\nConnection: close\r\n\r\n"
        );
        write.write_all(head.as_bytes()).await.unwrap();
        let writer = tokio::spawn(async move {
            let mut sent = 0;
            while sent < size {
                let n = (size - sent).min(CHUNK);
                let wrote = if chunked {
                    let mut framed = format!("{n:x}\r\n").into_bytes();
                    framed.extend_from_slice(&chunk[..n]);
                    framed.extend_from_slice(b"\r\n");
                    write.write_all(&framed).await
                } else {
                    write.write_all(&chunk[..n]).await
                };
                if wrote.is_err() {
                    break;
                }
                sent += n;
            }
            if chunked {
                let _ = write.write_all(b"0\r\n\r\n").await;
            }
            (sent, write)
        });
        let mut reader = BufReader::new(read);
        let mut status = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap() == 0 || line == "\r\n" {
                break;
            }
            status.push_str(&line);
        }
        // Stop writing: what was written when the answer came is the count.
        writer.abort();
        let sent = match writer.await {
            Ok((sent, _)) => sent,
            Err(_) => 0,
        };
        (status.trim().to_string(), sent)
    }

    #[tokio::test]
    async fn a_100_mb_webhook_body_is_refused_before_it_is_read_whole() {
        let (address, trigger, shutdown) = serving(true).await;
        let big = 100 * 1024 * 1024;
        for chunked in [false, true] {
            let started = std::time::Instant::now();
            let (status, sent) = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                post_hook(address, big, chunked),
            )
            .await
            .expect("an answer, not a read of 100 MB");
            assert!(
                status.starts_with("HTTP/1.1 413"),
                "chunked {chunked}: {status}"
            );
            // Socket buffers take a few megabytes more than the server read.
            assert!(
                sent < big / 4,
                "chunked {chunked}: {sent} bytes were written before the refusal"
            );
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
        }
        let woken = tokio::time::timeout(std::time::Duration::from_millis(200), trigger.notified());
        assert!(
            woken.await.is_err(),
            "a refused hook must not trigger a fetch"
        );

        // The same request under the limit is accepted: the limit, not the route, refused.
        let (status, _) = post_hook(address, 1000, false).await;
        assert!(status.starts_with("HTTP/1.1 202"), "{status}");
        let (status, _) = post_hook(address, MAX_WEBHOOK_BODY_BYTES + 1, false).await;
        assert!(status.starts_with("HTTP/1.1 413"), "{status}");
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_standby_that_cannot_pass_a_webhook_on_says_so_with_retry_after() {
        let (address, trigger, shutdown) = serving(false).await;
        let (head, _) = post_hook(address, 1000, false).await;
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("retry-after: {STANDBY_RETRY_AFTER_SECS}\r\n")),
            "{head}"
        );
        let woken = tokio::time::timeout(std::time::Duration::from_millis(200), trigger.notified());
        assert!(
            woken.await.is_err(),
            "a standby does not wake its own loop: it does not lead"
        );
        shutdown.cancel();
    }

    #[test]
    fn only_a_server_side_apply_of_the_sync_to_the_object_marks_it_applied() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let meta = |entries: &[(&str, &str, Option<&str>)]| kube::api::ObjectMeta {
            managed_fields: Some(
                entries
                    .iter()
                    .map(|(manager, operation, subresource)| ManagedFieldsEntry {
                        manager: Some(manager.to_string()),
                        operation: Some(operation.to_string()),
                        subresource: subresource.map(str::to_string),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        assert!(applied_by_sync(&meta(&[(FIELD_MANAGER, "Apply", None)])));
        assert!(applied_by_sync(&meta(&[
            ("kubectl-camelk", "Update", None),
            (FIELD_MANAGER, "Apply", Some("")),
        ])));
        // Its status only (the object Flux applied), its own relayed
        // annotation, or another tool's apply: not the sync's object.
        assert!(!applied_by_sync(&meta(&[
            ("kustomize-controller", "Apply", None),
            (FIELD_MANAGER, "Apply", Some("status")),
            (FIELD_MANAGER, "Update", None),
        ])));
        assert!(!applied_by_sync(&kube::api::ObjectMeta::default()));
    }

    // Found by the `webhook` fuzz target: a header of non-ASCII bytes was
    // reported as missing.
    #[test]
    fn a_signature_header_that_is_not_text_is_malformed() {
        for name in ["x-hub-signature-256", "x-gitea-signature"] {
            let mut headers = HeaderMap::new();
            let value = axum::http::HeaderValue::from_bytes("sha256=00д0".as_bytes()).unwrap();
            headers.insert(name, value);
            assert_eq!(
                verify_signature(b"s3cret", &headers, b"{}"),
                Err(SignatureError::Malformed),
                "{name}"
            );
        }
    }

    #[test]
    fn metrics_are_exposed_with_the_prefix() {
        let t = Telemetry::default();
        t.resources
            .get_or_create(&OperatorLabel {
                operator: "operator-2".into(),
            })
            .set(7);
        t.sync_duration.observe(0.3);
        let text = t.encode();
        assert!(
            text.contains("camelk_resources{operator=\"operator-2\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("camelk_sync_duration_seconds_count 1"),
            "{text}"
        );
        assert!(text.contains("camelk_handoffs_in_progress 0"), "{text}");
    }
}
