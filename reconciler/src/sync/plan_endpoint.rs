//! `GET /plan?head=REV[&base=REV][&namespace=NS]`: the plan of any revision
//! of the followed repository against the sync's own watch cache, for a CI
//! job that has no cluster credentials.
//!
//! Expected flow of one request:
//! 1. the bearer token is checked against the token file, read again for
//!    every request (a rotated Secret takes effect without a restart);
//!    without a configured file every request is refused (404), without or
//!    with a wrong token too (401);
//! 2. only the leader plans, from the watch cache its rounds keep warm: a
//!    standby answers 503 with `Retry-After` (a retry through the Service
//!    reaches the leader; see [`super::server`], "Replicas"), as does the
//!    leader while that cache has not listed every kind in scope;
//! 3. `head` and `base` are fetched from the remote when they name a branch
//!    or ref, or when the clone lacks the commit ([`GitSource::read_revision`]),
//!    into a clone of the endpoint's own;
//! 4. both manifests are validated as the sync validates them; the live
//!    owners in the head manifest's scope come from the watch cache, the
//!    phases of would-be moves from the API server;
//! 5. [`plan_reading_phases`] plans, as `kubectl camelk plan --base --head`
//!    does, with its restart forecast ([`read_restart_forecast`]: the moved
//!    Integrations' Deployments, listed), and the answer is a
//!    [`ServedPlan`] as JSON.
//!
//! Guarantees: nothing is written to the cluster; the token is never logged
//! and is compared by digest, not byte by byte.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::Client;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::owner_watch::LiveCache;
use super::reads::{CACHE_PATIENCE, Reach};
use super::server::STANDBY_RETRY_AFTER_SECS;
use crate::lock::Leadership;
use crate::manifest::Manifest;
use crate::plan::Actual;
use crate::plan::with_phases::{ServedPlan, plan_reading_phases, read_restart_forecast};
use crate::source::SourceError;
use crate::source::git::GitSource;

/// What the endpoint plans with.
pub(crate) struct PlanService {
    pub(crate) client: Client,
    /// A clone of the followed repository of the endpoint's own.
    pub(crate) source: GitSource,
    pub(crate) live: LiveCache,
    /// The file holding the bearer token.
    pub(crate) token_file: PathBuf,
    /// One fetch into the endpoint's clone at a time.
    pub(crate) fetching: tokio::sync::Mutex<()>,
    /// Only the leader plans: its watch cache is the warm one.
    pub(crate) leadership: Leadership,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PlanQuery {
    head: String,
    base: Option<String>,
    namespace: Option<String>,
}

/// A refusal: its status and a line for people.
struct Refusal(StatusCode, String);

impl Refusal {
    /// A 503 a retry may get past: sent with `Retry-After`.
    fn unavailable(why: impl Into<String>) -> Refusal {
        Refusal(StatusCode::SERVICE_UNAVAILABLE, why.into())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.0, format!("{}\n", self.1)).into_response();
        let headers = response.headers_mut();
        if self.0 == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().expect("a header value"),
            );
        }
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, STANDBY_RETRY_AFTER_SECS.into());
        }
        response
    }
}

/// Answers one plan request; `service` is `None` when no token is configured.
pub(crate) async fn serve_plan(
    service: Option<Arc<PlanService>>,
    headers: &HeaderMap,
    query: &PlanQuery,
) -> Response {
    let Some(service) = service else {
        return Refusal(
            StatusCode::NOT_FOUND,
            "the plan endpoint is off: start the reconciler with --plan-token-file".into(),
        )
        .into_response();
    };
    match service.answer(headers, query).await {
        Ok(served) => Json(served).into_response(),
        Err(refusal) => {
            tracing::info!(status = %refusal.0, reason = %refusal.1, "plan request refused");
            refusal.into_response()
        }
    }
}

impl PlanService {
    async fn answer(&self, headers: &HeaderMap, query: &PlanQuery) -> Result<ServedPlan, Refusal> {
        self.authorize(headers)?;
        // After the token, so a wrong one is refused alike on every replica.
        if !self.leadership.is_leading() {
            return Err(Refusal::unavailable(
                "this replica stands by; the leader serves plans: retry (the Service \
                 sends requests to every replica)",
            ));
        }
        let (head_sha, head) = {
            let _one_fetch = self.fetching.lock().await;
            self.manifest_at(&query.head).await?
        };
        let head = head.ok_or_else(|| {
            Refusal(
                StatusCode::NOT_FOUND,
                format!(
                    "{} does not exist at {} ({head_sha})",
                    self.source.path(),
                    query.head
                ),
            )
        })?;
        let (base_sha, base) = match &query.base {
            Some(rev) => {
                let _one_fetch = self.fetching.lock().await;
                let (sha, manifest) = self.manifest_at(rev).await?;
                // A pull request that adds the manifest has none at its base.
                (manifest.is_some().then_some(sha), manifest)
            }
            None => (None, None),
        };
        let spec = &head.assignment.spec;
        let reach = Reach::of(spec, None);
        let mut inventory = self
            .live
            .synced_snapshot(&reach, CACHE_PATIENCE)
            .await
            .ok_or_else(|| {
                Refusal::unavailable(
                    "the watch cache has not listed every kind in scope yet; retry shortly",
                )
            })?;
        if let Some(namespace) = &query.namespace {
            inventory.resources.retain(|r| r.id.namespace == *namespace);
        }
        crate::inventory::metadata_list::mark_guarded(&self.client, &mut inventory)
            .await
            .map_err(|e| Refusal(StatusCode::BAD_GATEWAY, e.to_string()))?;
        let actual = match &base {
            Some(base) => Actual::Manifest(&base.assignment.spec),
            None => Actual::OwnerKeys,
        };
        let mut plan = plan_reading_phases(&self.client, spec, actual, inventory)
            .await
            .map_err(|e| Refusal(StatusCode::BAD_GATEWAY, e.to_string()))?;
        // The forecast is an aid: without it the plan still stands, and says why.
        if let Err(e) = read_restart_forecast(&self.client, &mut plan).await {
            plan.notes.push(format!(
                "no restart forecast: reading the moved Integrations' Deployments failed: {e}"
            ));
        }
        let meta = &head.assignment.metadata;
        let name = meta.name.clone().unwrap_or_default();
        Ok(ServedPlan {
            assignment: match &meta.namespace {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name,
            },
            base: base_sha,
            head: head_sha,
            plan,
        })
    }

    /// Refuses a request without the configured bearer token.
    fn authorize(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let expected = std::fs::read(&self.token_file).map_err(|e| {
            tracing::error!(file = %self.token_file.display(), error = %e, "reading the plan token");
            Refusal(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the plan token file cannot be read".into(),
            )
        })?;
        let expected = expected.trim_ascii();
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let unauthorized = |why: &str| Refusal(StatusCode::UNAUTHORIZED, why.into());
        let given = given.ok_or_else(|| unauthorized("no bearer token"))?;
        if expected.is_empty() || Sha256::digest(given) != Sha256::digest(expected) {
            return Err(unauthorized("wrong bearer token"));
        }
        Ok(())
    }

    /// The commit `rev` resolves to and its manifest, validated; `None` when
    /// the manifest does not exist there.
    async fn manifest_at(&self, rev: &str) -> Result<(String, Option<Manifest>), Refusal> {
        let revision = match self.source.read_revision(rev).await {
            Ok(revision) => revision,
            Err(SourceError::MissingFile { sha, .. }) => return Ok((sha, None)),
            Err(e @ SourceError::InvalidRevision { .. }) => {
                return Err(Refusal(StatusCode::BAD_REQUEST, e.to_string()));
            }
            Err(e @ SourceError::NoRevision { .. }) => {
                return Err(Refusal(StatusCode::NOT_FOUND, e.to_string()));
            }
            Err(e) => return Err(Refusal(StatusCode::BAD_GATEWAY, e.to_string())),
        };
        let file = format!("{}@{rev}", revision.file);
        let manifest = Manifest::parse(&file, revision.text)
            .map_err(|e| Refusal(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
        Ok((revision.sha, Some(manifest)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan service whose API server and repository are never reached:
    /// every request below is answered before either is needed.
    fn service(leading: bool, dir: &std::path::Path) -> Arc<PlanService> {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let live = LiveCache::start(
            &client,
            super::super::owner_watch::LiveCacheMode::Metadata,
            Arc::new(tokio::sync::Notify::new()),
            None,
            &shutdown,
        );
        let cache = dir.join("clone");
        Arc::new(PlanService {
            client,
            source: GitSource::new("file:///nonexistent", "main", "oa.yaml", &cache),
            live,
            token_file: dir.join("token"),
            fetching: tokio::sync::Mutex::new(()),
            leadership: Leadership::fixed(leading),
        })
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        headers
    }

    // Multi-threaded: the leader's read of the repository blocks in place.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_standby_checks_the_token_then_answers_503_with_retry_after() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "t0ken\n").unwrap();
        let query = PlanQuery {
            head: "main".into(),
            base: None,
            namespace: None,
        };
        let standby = service(false, dir.path());
        let answer = serve_plan(Some(standby.clone()), &bearer("t0ken"), &query).await;
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            answer.headers()[header::RETRY_AFTER],
            STANDBY_RETRY_AFTER_SECS.to_string()
        );
        let body = axum::body::to_bytes(answer.into_body(), 4096)
            .await
            .unwrap();
        assert!(
            String::from_utf8_lossy(&body).contains("stands by"),
            "{body:?}"
        );
        // A wrong token is refused as the leader refuses it.
        let answer = serve_plan(Some(standby), &bearer("guess"), &query).await;
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
        assert!(answer.headers().get(header::RETRY_AFTER).is_none());

        // The leader goes on to read the revision (here from a repository
        // that does not exist): it does not refuse as a standby.
        let leader = service(true, dir.path());
        let answer = serve_plan(Some(leader), &bearer("t0ken"), &query).await;
        assert_ne!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_ne!(answer.status(), StatusCode::UNAUTHORIZED);
    }
}
