//! Rollout notifications that never hold up a rollout.
//!
//! The rollout code calls [`Notifier::send`], which only puts the event on a
//! bounded queue and returns. A background tokio task fans every event out to
//! one worker per [`Target`]; each worker delivers its events in order, with
//! retries and backoff, so one slow or broken target never delays the others.
//!
//! Targets carry resolved secrets (tokens, webhook URLs whose path is the
//! secret), so nothing here logs a URL or a token: logs name the target by its
//! configured `name` only, and transport errors are reduced to a description
//! that cannot contain the URL.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc::{self, error::TrySendError};

/// Events waiting for the dispatcher, and per target; past this they are dropped.
const QUEUE_CAPACITY: usize = 256;
/// Upper bound for one HTTP call, so a hanging endpoint only stalls its own worker.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The commit status "context" (GitHub) or "name" (GitLab) this reconciler owns.
const STATUS_CONTEXT: &str = "camelk/rollout";
/// GitHub rejects API calls without a User-Agent.
const USER_AGENT: &str = "camelk-reconciler";
/// GitHub's limit for a status description.
const DESCRIPTION_MAX_CHARS: usize = 140;
/// Enough of an error body to recognise GitLab's transition message.
const ERROR_BODY_LIMIT: u64 = 4096;

/// What happened to a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub(crate) enum Kind {
    Started,
    StepDone,
    WaitingForApproval,
    Stalled,
    RolledBack,
    Applied,
}

/// One notification: what happened, to which revision and step, with counts and a link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    pub(crate) kind: Kind,
    /// `namespace/name` of the assignment being rolled out.
    pub(crate) assignment: String,
    /// Full commit SHA, or a synthetic revision such as `generation-3`.
    pub(crate) revision: String,
    pub(crate) step: u32,
    pub(crate) total_steps: u32,
    /// Resources moved so far in this rollout.
    pub(crate) moved: u64,
    /// Human readable summary.
    pub(crate) message: String,
    /// For example a commit URL.
    pub(crate) link: Option<String>,
    /// RFC 3339 time given by the caller, so this module never reads a clock.
    pub(crate) at: String,
}

/// Where notifications go, with secrets already resolved by the caller.
///
/// `Debug` shows only the variant and the name, because the URL and token are secrets.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// POST the [`Event`] as JSON.
    Webhook { name: String, url: String },
    /// POST a Slack incoming-webhook payload `{"text": "..."}`.
    Slack { name: String, url: String },
    /// Commit status on GitHub; `repository` is `owner/name`.
    GitHubStatus {
        name: String,
        api: String,
        repository: String,
        token: String,
    },
    /// Commit status on GitLab; `project` is an id or a URL-encoded path.
    GitLabStatus {
        name: String,
        api: String,
        project: String,
        token: String,
    },
}

impl Target {
    /// The configured name: the only part of a target that is safe to log.
    pub(crate) fn name(&self) -> &str {
        match self {
            Target::Webhook { name, .. }
            | Target::Slack { name, .. }
            | Target::GitHubStatus { name, .. }
            | Target::GitLabStatus { name, .. } => name,
        }
    }

    fn kind_label(&self) -> &'static str {
        match self {
            Target::Webhook { .. } => "Webhook",
            Target::Slack { .. } => "Slack",
            Target::GitHubStatus { .. } => "GitHubStatus",
            Target::GitLabStatus { .. } => "GitLabStatus",
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({:?})", self.kind_label(), self.name())
    }
}

/// How hard to try before giving up on one event for one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retry {
    /// Total attempts, the first one included (0 is treated as 1).
    pub(crate) attempts: u32,
    /// Wait after the first failure; doubles after each further failure.
    pub(crate) first: Duration,
    /// Cap for the wait, also for a server's `Retry-After`.
    pub(crate) max: Duration,
}

impl Default for Retry {
    /// 5 attempts, waiting 1 s doubling up to 30 s.
    fn default() -> Self {
        Retry {
            attempts: 5,
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

impl Retry {
    /// The wait after failed attempt number `failures` (1-based). A server's
    /// `Retry-After` wins over the backoff, but never beyond `max`.
    fn delay(&self, failures: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max);
        }
        let doublings = failures.saturating_sub(1).min(31);
        self.first.saturating_mul(1u32 << doublings).min(self.max)
    }
}

/// Clone-able handle on the delivery task. When every handle is dropped the
/// task finishes what is queued and stops.
#[derive(Clone)]
pub(crate) struct Notifier {
    queue: mpsc::Sender<Queued>,
    shared: Arc<Shared>,
}

/// State shared between the handles and the background tasks.
struct Shared {
    /// Snapshot taken by `send`, so an event goes to the targets that were
    /// configured when it was sent, not when it happens to be dispatched.
    targets: Mutex<Arc<[Target]>>,
    delivered: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
}

/// An event on its way to the dispatcher, with the targets it is meant for.
struct Queued {
    event: Arc<Event>,
    targets: Arc<[Target]>,
}

impl Notifier {
    /// Starts the delivery task on the current tokio runtime.
    ///
    /// # Panics
    /// When called outside a tokio runtime, like [`tokio::spawn`].
    pub(crate) fn start(targets: Vec<Target>, retry: Retry) -> Notifier {
        Self::start_with_timeout(targets, retry, REQUEST_TIMEOUT)
    }

    /// [`Notifier::start`] with a chosen per-request timeout (tests use a short one).
    fn start_with_timeout(targets: Vec<Target>, retry: Retry, timeout: Duration) -> Notifier {
        let (queue, receiver) = mpsc::channel(QUEUE_CAPACITY);
        let shared = Arc::new(Shared {
            targets: Mutex::new(targets.into()),
            delivered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let delivery = Delivery {
            agent: http_agent(timeout),
            retry,
            shared: Arc::clone(&shared),
        };
        tokio::spawn(dispatch(receiver, delivery));
        Notifier { queue, shared }
    }

    /// Queues `event` for every current target. Never blocks and never fails:
    /// when the queue is full the event is dropped with a warning, because a
    /// late or missing notification is better than a stuck rollout.
    pub(crate) fn send(&self, event: Event) {
        let targets = Arc::clone(&lock(&self.shared.targets));
        let queued = Queued {
            event: Arc::new(event),
            targets,
        };
        if let Err(err) = self.queue.try_send(queued) {
            let (reason, queued) = match err {
                TrySendError::Full(queued) => ("the notification queue is full", queued),
                TrySendError::Closed(queued) => ("the delivery task has stopped", queued),
            };
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                kind = ?queued.event.kind,
                assignment = %queued.event.assignment,
                step = queued.event.step,
                "dropping rollout notification: {reason}"
            );
        }
    }

    /// Replaces the targets for events sent from now on; events already sent
    /// still go to the targets they were sent for.
    pub(crate) fn set_targets(&self, targets: Vec<Target>) {
        *lock(&self.shared.targets) = targets.into();
    }

    /// Event deliveries a target accepted (one per event and target).
    #[cfg(test)]
    pub(crate) fn delivered(&self) -> u64 {
        self.shared.delivered.load(Ordering::Relaxed)
    }

    /// Event deliveries given up on (one per event and target): permanent
    /// errors, retries exhausted, or a target's own queue overflowing.
    #[cfg(test)]
    pub(crate) fn failed(&self) -> u64 {
        self.shared.failed.load(Ordering::Relaxed)
    }

    /// Events dropped by [`Notifier::send`] because the queue was full.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

/// Locks the target list, ignoring poisoning: the list is replaced whole, so a
/// panic elsewhere cannot leave it half-written.
fn lock(targets: &Mutex<Arc<[Target]>>) -> std::sync::MutexGuard<'_, Arc<[Target]>> {
    targets.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The blocking HTTP client, set up so every answer comes back as a response.
fn http_agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        // Classify 4xx/5xx ourselves (and read Retry-After) instead of getting
        // `Error::StatusCode`, which drops the headers.
        .http_status_as_error(false)
        // A redirect would re-send the body, and custom token headers, elsewhere.
        .max_redirects(0)
        .timeout_global(Some(timeout))
        .user_agent(USER_AGENT)
        .build()
        .new_agent()
}

/// What every per-target worker needs.
#[derive(Clone)]
struct Delivery {
    agent: ureq::Agent,
    retry: Retry,
    shared: Arc<Shared>,
}

/// Fans queued events out to one worker per target. Workers live as long as
/// their target stays configured, which keeps per-target order across
/// `set_targets` calls that keep a target.
async fn dispatch(mut receiver: mpsc::Receiver<Queued>, delivery: Delivery) {
    let mut workers: HashMap<Target, mpsc::Sender<Arc<Event>>> = HashMap::new();
    let mut current: Option<Arc<[Target]>> = None;
    while let Some(queued) = receiver.recv().await {
        if !current
            .as_ref()
            .is_some_and(|targets| Arc::ptr_eq(targets, &queued.targets))
        {
            // Dropping a worker's sender lets it finish its queue and stop.
            workers.retain(|target, _| queued.targets.contains(target));
            current = Some(Arc::clone(&queued.targets));
        }
        for target in queued.targets.iter() {
            let worker = workers
                .entry(target.clone())
                .or_insert_with(|| spawn_worker(target.clone(), delivery.clone()));
            if worker.is_closed() {
                // The worker panicked; start a fresh one rather than go silent.
                *worker = spawn_worker(target.clone(), delivery.clone());
            }
            if worker.try_send(Arc::clone(&queued.event)).is_err() {
                delivery.shared.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    target_name = target.name(),
                    kind = ?queued.event.kind,
                    assignment = %queued.event.assignment,
                    "dropping rollout notification: the target is too far behind"
                );
            }
        }
    }
}

fn spawn_worker(target: Target, delivery: Delivery) -> mpsc::Sender<Arc<Event>> {
    let (sender, mut receiver) = mpsc::channel::<Arc<Event>>(QUEUE_CAPACITY);
    tokio::spawn(async move {
        while let Some(event) = receiver.recv().await {
            deliver(&target, &event, &delivery).await;
        }
    });
    sender
}

/// Delivers one event to one target, retrying transient failures.
async fn deliver(target: &Target, event: &Event, delivery: &Delivery) {
    let name = target.name();
    let request = match build_request(target, event) {
        Ok(Some(request)) => Arc::new(request),
        Ok(None) => {
            tracing::debug!(
                target_name = name,
                revision = %event.revision,
                "not a commit SHA: skipping the commit status"
            );
            return;
        }
        Err(err) => {
            delivery.shared.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target_name = name, error = %err, "cannot build the notification");
            return;
        }
    };
    let attempts = delivery.retry.attempts.max(1);
    for attempt in 1..=attempts {
        let err = match post(&delivery.agent, &request).await {
            Ok(()) => {
                delivery.shared.delivered.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target_name = name, kind = ?event.kind, attempt, "notification delivered");
                return;
            }
            Err(err) => err,
        };
        if !err.is_retryable() {
            delivery.shared.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target_name = name, kind = ?event.kind, error = %err, "notification rejected, not retrying");
            return;
        }
        if attempt == attempts {
            delivery.shared.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target_name = name, kind = ?event.kind, attempts, error = %err, "giving up on notification");
            return;
        }
        let wait = delivery.retry.delay(attempt, err.retry_after());
        tracing::debug!(target_name = name, attempt, error = %err, ?wait, "notification failed, will retry");
        tokio::time::sleep(wait).await;
    }
}

/// Why one delivery attempt failed. Messages never contain the URL or token.
#[derive(Debug, thiserror::Error)]
enum DeliveryError {
    #[error("the target answered HTTP {status}")]
    Status {
        status: u16,
        retry_after: Option<Duration>,
    },
    #[error("{reason}")]
    Transport { reason: String, retryable: bool },
    #[error("the HTTP task {0}")]
    Task(&'static str),
}

impl DeliveryError {
    /// Network trouble, 5xx, 408 and 429 may pass; other answers will not change.
    fn is_retryable(&self) -> bool {
        match self {
            DeliveryError::Status { status, .. } => {
                matches!(status, 408 | 429) || (500..=599).contains(status)
            }
            DeliveryError::Transport { retryable, .. } => *retryable,
            // A panic is a bug that would repeat; cancellation means shutdown.
            DeliveryError::Task(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            DeliveryError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Keeps only what is safe to log: some ureq errors quote the URL.
    fn from_ureq(err: &ureq::Error) -> Self {
        use ureq::Error as E;
        let (reason, retryable) = match err {
            E::Timeout(which) => (format!("timed out ({which})"), true),
            // The kind only: an io message may name the address.
            E::Io(io) => (format!("i/o error ({:?})", io.kind()), true),
            E::HostNotFound => ("host not found".to_owned(), true),
            E::ConnectionFailed => ("connection failed".to_owned(), true),
            E::Tls(what) => (format!("TLS error ({what})"), true),
            E::Rustls(tls) => (format!("TLS error ({tls})"), true),
            E::BadUri(_) | E::RequireHttpsOnly(_) => ("the URL is not valid".to_owned(), false),
            E::Http(_) => (
                "the request is not valid (a bad header value?)".to_owned(),
                false,
            ),
            _ => ("transport error".to_owned(), true),
        };
        DeliveryError::Transport { reason, retryable }
    }
}

/// A ready-to-send POST with a JSON body.
struct HttpRequest {
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    /// GitLab answers 400 "Cannot transition status via :run from :running"
    /// when a status is posted twice in the same state (every StepDone after
    /// the first) or moves back from running to pending. The status is then
    /// already what we would set, so treat that answer as delivered.
    gitlab_transition_is_ok: bool,
}

impl HttpRequest {
    fn send(&self, agent: &ureq::Agent) -> Result<(), DeliveryError> {
        let mut builder = agent.post(self.url.as_str());
        for (name, value) in &self.headers {
            builder = builder.header(*name, value.as_str());
        }
        let mut response = builder
            .content_type("application/json")
            .send(self.body.as_slice())
            .map_err(|err| DeliveryError::from_ureq(&err))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(());
        }
        if status == 400 && self.gitlab_transition_is_ok {
            let body = response
                .body_mut()
                .with_config()
                .limit(ERROR_BODY_LIMIT)
                .lossy_utf8(true)
                .read_to_string()
                .unwrap_or_default();
            if body.contains("Cannot transition status") {
                return Ok(());
            }
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        Err(DeliveryError::Status {
            status,
            retry_after,
        })
    }
}

/// Runs the blocking ureq call off the async workers.
async fn post(agent: &ureq::Agent, request: &Arc<HttpRequest>) -> Result<(), DeliveryError> {
    let agent = agent.clone();
    let request = Arc::clone(request);
    match tokio::task::spawn_blocking(move || request.send(&agent)).await {
        Ok(result) => result,
        Err(join) if join.is_panic() => Err(DeliveryError::Task("panicked")),
        Err(_) => Err(DeliveryError::Task("was cancelled")),
    }
}

#[derive(Serialize)]
struct SlackMessage {
    text: String,
}

#[derive(Serialize)]
struct GitHubStatus<'a> {
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_url: Option<&'a str>,
    description: String,
    context: &'static str,
}

#[derive(Serialize)]
struct GitLabStatus<'a> {
    state: &'static str,
    name: &'static str,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_url: Option<&'a str>,
}

/// The request for `target`, or `None` when the target does not apply (a
/// commit status for a revision that is not a commit).
fn build_request(target: &Target, event: &Event) -> Result<Option<HttpRequest>, serde_json::Error> {
    let request = match target {
        Target::Webhook { url, .. } => HttpRequest {
            url: url.clone(),
            headers: Vec::new(),
            body: serde_json::to_vec(event)?,
            gitlab_transition_is_ok: false,
        },
        Target::Slack { url, .. } => HttpRequest {
            url: url.clone(),
            headers: Vec::new(),
            body: serde_json::to_vec(&SlackMessage {
                text: slack_text(event),
            })?,
            gitlab_transition_is_ok: false,
        },
        Target::GitHubStatus {
            api,
            repository,
            token,
            ..
        } => {
            if !is_commit_sha(&event.revision) {
                return Ok(None);
            }
            let state = match event.kind {
                Kind::Started | Kind::StepDone | Kind::WaitingForApproval => "pending",
                Kind::Applied => "success",
                Kind::Stalled | Kind::RolledBack => "failure",
            };
            HttpRequest {
                url: format!(
                    "{}/repos/{}/statuses/{}",
                    api.trim_end_matches('/'),
                    repository,
                    event.revision
                ),
                headers: vec![
                    ("Authorization", format!("Bearer {token}")),
                    ("Accept", "application/vnd.github+json".to_owned()),
                    ("User-Agent", USER_AGENT.to_owned()),
                ],
                body: serde_json::to_vec(&GitHubStatus {
                    state,
                    target_url: event.link.as_deref(),
                    description: description(&event.message),
                    context: STATUS_CONTEXT,
                })?,
                gitlab_transition_is_ok: false,
            }
        }
        Target::GitLabStatus {
            api,
            project,
            token,
            ..
        } => {
            if !is_commit_sha(&event.revision) {
                return Ok(None);
            }
            let state = match event.kind {
                Kind::StepDone => "running",
                Kind::Started | Kind::WaitingForApproval => "pending",
                Kind::Applied => "success",
                Kind::Stalled | Kind::RolledBack => "failed",
            };
            HttpRequest {
                url: format!(
                    "{}/projects/{}/statuses/{}",
                    api.trim_end_matches('/'),
                    project,
                    event.revision
                ),
                headers: vec![("PRIVATE-TOKEN", token.clone())],
                body: serde_json::to_vec(&GitLabStatus {
                    state,
                    name: STATUS_CONTEXT,
                    description: description(&event.message),
                    target_url: event.link.as_deref(),
                })?,
                gitlab_transition_is_ok: true,
            }
        }
    };
    Ok(Some(request))
}

/// Commit statuses need a full SHA-1; `generation-3` and the like are skipped.
fn is_commit_sha(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The message cut to what GitHub accepts, on a character boundary.
fn description(message: &str) -> String {
    message.chars().take(DESCRIPTION_MAX_CHARS).collect()
}

/// A commit SHA shortened the way people read it; other revisions as they are.
fn short_revision(revision: &str) -> &str {
    if is_commit_sha(revision) {
        &revision[..12]
    } else {
        revision
    }
}

/// One readable line, e.g.
/// `camelk rollout shop/fleet 9f1c2d3e4f5a: step 2 of 3 done (14 moved) <https://…|commit>`.
fn slack_text(event: &Event) -> String {
    let (step, total) = (event.step, event.total_steps);
    let what = match event.kind {
        Kind::Started => format!("started, step {step} of {total}"),
        Kind::StepDone => format!("step {step} of {total} done"),
        Kind::WaitingForApproval => format!("step {step} of {total} waiting for approval"),
        Kind::Stalled => format!("stalled at step {step} of {total}"),
        Kind::RolledBack => format!("rolled back at step {step} of {total}"),
        Kind::Applied => format!("applied, step {step} of {total}"),
    };
    let mut text = format!(
        "camelk rollout {} {}: {what} ({} moved)",
        slack_escape(&event.assignment),
        slack_escape(short_revision(&event.revision)),
        event.moved
    );
    if !event.message.trim().is_empty() {
        text.push_str(" - ");
        text.push_str(&slack_escape(event.message.trim()));
    }
    if let Some(link) = &event.link {
        text.push_str(&format!(" <{}|commit>", slack_link(link)));
    }
    text
}

/// Slack reads `&`, `<` and `>` as markup; these are the escapes it documents.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Keeps a URL from breaking out of `<url|label>`.
fn slack_link(url: &str) -> String {
    url.replace('<', "%3C")
        .replace('>', "%3E")
        .replace('|', "%7C")
        .replace(' ', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    const SHA: &str = "9f1c2d3e4f5a67890abcdef1234567890abcdef1";

    /// Short delays so retry tests take milliseconds.
    fn fast_retry() -> Retry {
        Retry {
            attempts: 3,
            first: Duration::from_millis(10),
            max: Duration::from_millis(50),
        }
    }

    fn start(targets: Vec<Target>) -> Notifier {
        Notifier::start_with_timeout(targets, fast_retry(), Duration::from_secs(1))
    }

    fn event(kind: Kind) -> Event {
        Event {
            kind,
            assignment: "shop/fleet".to_owned(),
            revision: SHA.to_owned(),
            step: 2,
            total_steps: 3,
            moved: 14,
            message: "moved 14 resources to operator camel-k-2".to_owned(),
            link: Some(format!("https://git.example/shop/commit/{SHA}")),
            at: "2024-05-01T12:00:00Z".to_owned(),
        }
    }

    #[derive(Clone, Debug)]
    struct Recorded {
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Recorded {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_str())
        }

        fn json(&self) -> serde_json::Value {
            serde_json::from_str(&self.body).expect("request body is JSON")
        }
    }

    /// A loopback HTTP server answering with scripted statuses (then 200).
    struct Receiver {
        base: String,
        requests: Arc<Mutex<Vec<Recorded>>>,
    }

    impl Receiver {
        fn ok() -> Receiver {
            Self::scripted(Vec::new(), false)
        }

        fn scripted(statuses: Vec<(u16, &'static str)>, retry_after_zero: bool) -> Receiver {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            let base = format!("http://{}", listener.local_addr().expect("local addr"));
            let requests = Arc::new(Mutex::new(Vec::new()));
            let recorded = Arc::clone(&requests);
            std::thread::spawn(move || {
                let mut script = statuses.into_iter();
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let Some(request) = read_request(&stream) else {
                        continue;
                    };
                    recorded.lock().expect("not poisoned").push(request);
                    let (status, body) = script.next().unwrap_or((200, ""));
                    let retry_after = if retry_after_zero {
                        "Retry-After: 0\r\n"
                    } else {
                        ""
                    };
                    let answer = format!(
                        "HTTP/1.1 {status} Scripted\r\nContent-Length: {}\r\n{retry_after}Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let mut stream = stream;
                    let _ = stream.write_all(answer.as_bytes());
                }
            });
            Receiver { base, requests }
        }

        /// Accepts connections and never answers.
        fn hanging() -> String {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            let base = format!("http://{}", listener.local_addr().expect("local addr"));
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for stream in listener.incoming() {
                    held.push(stream);
                }
            });
            base
        }

        fn url(&self, path: &str) -> String {
            format!("{}{path}", self.base)
        }

        fn requests(&self) -> Vec<Recorded> {
            self.requests.lock().expect("not poisoned").clone()
        }

        async fn wait_for(&self, count: usize) -> Vec<Recorded> {
            wait_until(|| self.requests().len() >= count).await;
            self.requests()
        }
    }

    fn read_request(stream: &TcpStream) -> Option<Recorded> {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let mut parts = line.split_whitespace();
        let method = parts.next()?.to_owned();
        let path = parts.next()?.to_owned();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).ok()?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (key, value) = line.split_once(':')?;
            headers.push((key.trim().to_owned(), value.trim().to_owned()));
        }
        let length = headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        Some(Recorded {
            method,
            path,
            headers,
            body: String::from_utf8(body).ok()?,
        })
    }

    /// Polls `done` for up to 5 s; the deadline only matters when a test fails.
    async fn wait_until(done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn webhook(name: &str, receiver: &Receiver) -> Target {
        Target::Webhook {
            name: name.to_owned(),
            url: receiver.url("/hook"),
        }
    }

    #[tokio::test]
    async fn webhook_gets_every_field_as_camel_case_json() {
        let receiver = Receiver::ok();
        let notifier = start(vec![webhook("hook", &receiver)]);
        notifier.send(event(Kind::StepDone));
        let requests = receiver.wait_for(1).await;
        assert_eq!(requests[0].method, "POST");
        assert_eq!(requests[0].path, "/hook");
        assert_eq!(requests[0].header("content-type"), Some("application/json"));
        assert_eq!(
            requests[0].json(),
            serde_json::json!({
                "kind": "StepDone",
                "assignment": "shop/fleet",
                "revision": SHA,
                "step": 2,
                "totalSteps": 3,
                "moved": 14,
                "message": "moved 14 resources to operator camel-k-2",
                "link": format!("https://git.example/shop/commit/{SHA}"),
                "at": "2024-05-01T12:00:00Z",
            })
        );
        wait_until(|| notifier.delivered() == 1).await;
        assert_eq!(notifier.failed(), 0);
    }

    #[tokio::test]
    async fn slack_gets_a_readable_one_liner() {
        let receiver = Receiver::ok();
        let notifier = start(vec![Target::Slack {
            name: "chat".to_owned(),
            url: receiver.url("/services/T0/B0/secret"),
        }]);
        notifier.send(event(Kind::StepDone));
        let requests = receiver.wait_for(1).await;
        let body = requests[0].json();
        let text = body["text"].as_str().expect("text is a string");
        assert_eq!(body.as_object().map(|o| o.len()), Some(1));
        assert_eq!(
            text,
            format!(
                "camelk rollout shop/fleet 9f1c2d3e4f5a: step 2 of 3 done (14 moved) - \
                 moved 14 resources to operator camel-k-2 <https://git.example/shop/commit/{SHA}|commit>"
            )
        );
    }

    #[tokio::test]
    async fn github_status_path_headers_and_states() {
        let receiver = Receiver::ok();
        let notifier = start(vec![Target::GitHubStatus {
            name: "github".to_owned(),
            api: receiver.url("/api/"),
            repository: "acme/shop".to_owned(),
            token: "ghp_secret".to_owned(),
        }]);
        let kinds = [
            (Kind::Started, "pending"),
            (Kind::StepDone, "pending"),
            (Kind::WaitingForApproval, "pending"),
            (Kind::Stalled, "failure"),
            (Kind::RolledBack, "failure"),
            (Kind::Applied, "success"),
        ];
        for (kind, _) in kinds {
            notifier.send(event(kind));
        }
        let mut without_link = event(Kind::Applied);
        without_link.link = None;
        without_link.message = "x".repeat(200);
        notifier.send(without_link);

        let requests = receiver.wait_for(kinds.len() + 1).await;
        for (request, (kind, state)) in requests.iter().zip(kinds) {
            assert_eq!(request.path, format!("/api/repos/acme/shop/statuses/{SHA}"));
            assert_eq!(request.header("authorization"), Some("Bearer ghp_secret"));
            assert_eq!(
                request.header("accept"),
                Some("application/vnd.github+json")
            );
            assert_eq!(request.header("user-agent"), Some("camelk-reconciler"));
            let agents = request
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("user-agent"));
            assert_eq!(agents.count(), 1);
            let body = request.json();
            assert_eq!(body["state"], state, "{kind:?}");
            assert_eq!(body["context"], "camelk/rollout");
            assert_eq!(
                body["description"],
                "moved 14 resources to operator camel-k-2"
            );
            assert_eq!(
                body["target_url"],
                format!("https://git.example/shop/commit/{SHA}")
            );
        }
        let last = requests[kinds.len()].json();
        assert!(last.get("target_url").is_none());
        assert_eq!(last["description"].as_str().map(str::len), Some(140));
    }

    #[tokio::test]
    async fn gitlab_status_path_headers_and_states() {
        let receiver = Receiver::ok();
        let notifier = start(vec![Target::GitLabStatus {
            name: "gitlab".to_owned(),
            api: receiver.url("/api/v4"),
            project: "acme%2Fshop".to_owned(),
            token: "glpat-secret".to_owned(),
        }]);
        let kinds = [
            (Kind::Started, "pending"),
            (Kind::StepDone, "running"),
            (Kind::WaitingForApproval, "pending"),
            (Kind::Stalled, "failed"),
            (Kind::RolledBack, "failed"),
            (Kind::Applied, "success"),
        ];
        for (kind, _) in kinds {
            notifier.send(event(kind));
        }
        let requests = receiver.wait_for(kinds.len()).await;
        for (request, (kind, state)) in requests.iter().zip(kinds) {
            assert_eq!(
                request.path,
                format!("/api/v4/projects/acme%2Fshop/statuses/{SHA}")
            );
            assert_eq!(request.header("private-token"), Some("glpat-secret"));
            assert_eq!(request.header("authorization"), None);
            let body = request.json();
            assert_eq!(body["state"], state, "{kind:?}");
            assert_eq!(body["name"], "camelk/rollout");
            assert_eq!(
                body["description"],
                "moved 14 resources to operator camel-k-2"
            );
            assert_eq!(
                body["target_url"],
                format!("https://git.example/shop/commit/{SHA}")
            );
        }
    }

    #[tokio::test]
    async fn gitlab_repeated_state_counts_as_delivered() {
        let receiver = Receiver::scripted(
            vec![(
                400,
                r#"{"message":"Cannot transition status via :run from :running"}"#,
            )],
            false,
        );
        let notifier = start(vec![Target::GitLabStatus {
            name: "gitlab".to_owned(),
            api: receiver.url(""),
            project: "7".to_owned(),
            token: "t".to_owned(),
        }]);
        notifier.send(event(Kind::StepDone));
        wait_until(|| notifier.delivered() == 1).await;
        assert_eq!(notifier.failed(), 0);
        assert_eq!(receiver.requests().len(), 1);
    }

    #[tokio::test]
    async fn retries_after_503_then_succeeds() {
        let receiver = Receiver::scripted(vec![(503, ""), (503, "")], true);
        let notifier = start(vec![webhook("hook", &receiver)]);
        notifier.send(event(Kind::Started));
        wait_until(|| notifier.delivered() == 1).await;
        assert_eq!(receiver.requests().len(), 3);
        assert_eq!(notifier.failed(), 0);
    }

    #[tokio::test]
    async fn gives_up_after_the_configured_attempts() {
        let receiver = Receiver::scripted(vec![(500, ""); 10], false);
        let notifier = start(vec![webhook("hook", &receiver)]);
        notifier.send(event(Kind::Started));
        wait_until(|| notifier.failed() == 1).await;
        assert_eq!(receiver.requests().len(), 3);
        assert_eq!(notifier.delivered(), 0);
    }

    #[tokio::test]
    async fn not_found_is_not_retried() {
        let receiver = Receiver::scripted(vec![(404, "")], false);
        let notifier = start(vec![webhook("hook", &receiver)]);
        notifier.send(event(Kind::Started));
        wait_until(|| notifier.failed() == 1).await;
        // Longer than the whole retry schedule would take.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(receiver.requests().len(), 1);
        assert_eq!(notifier.delivered(), 0);
    }

    #[tokio::test]
    async fn hanging_target_does_not_delay_others() {
        let receiver = Receiver::ok();
        let notifier = start(vec![
            Target::Webhook {
                name: "stuck".to_owned(),
                url: format!("{}/hook", Receiver::hanging()),
            },
            webhook("fine", &receiver),
        ]);
        let started = Instant::now();
        for kind in [Kind::Started, Kind::StepDone, Kind::Applied] {
            notifier.send(event(kind));
        }
        let requests = receiver.wait_for(3).await;
        // The stuck target's first request alone takes the 1 s timeout.
        assert!(started.elapsed() < Duration::from_millis(800));
        let kinds: Vec<_> = requests.iter().map(|r| r.json()["kind"].clone()).collect();
        assert_eq!(kinds, ["Started", "StepDone", "Applied"]);
    }

    #[tokio::test]
    async fn generation_revision_skips_commit_statuses_but_reaches_webhooks() {
        let hook = Receiver::ok();
        let github = Receiver::ok();
        let gitlab = Receiver::ok();
        let notifier = start(vec![
            webhook("hook", &hook),
            Target::GitHubStatus {
                name: "github".to_owned(),
                api: github.url(""),
                repository: "acme/shop".to_owned(),
                token: "t".to_owned(),
            },
            Target::GitLabStatus {
                name: "gitlab".to_owned(),
                api: gitlab.url(""),
                project: "7".to_owned(),
                token: "t".to_owned(),
            },
        ]);
        let mut generation = event(Kind::StepDone);
        generation.revision = "generation-3".to_owned();
        notifier.send(generation);
        // Each target handles events in order, so once the SHA event arrives
        // the generation one has been skipped, not merely delayed.
        notifier.send(event(Kind::Applied));
        let hooked = hook.wait_for(2).await;
        assert_eq!(hooked[0].json()["revision"], "generation-3");
        for receiver in [&github, &gitlab] {
            let requests = receiver.wait_for(1).await;
            assert_eq!(requests.len(), 1);
            assert!(requests[0].path.ends_with(SHA));
        }
    }

    #[tokio::test]
    async fn full_queue_drops_without_blocking() {
        let receiver = Receiver::ok();
        let notifier = start(vec![webhook("hook", &receiver)]);
        // The test runtime is single-threaded and nothing here awaits, so the
        // delivery task cannot drain the queue while we fill it.
        let started = Instant::now();
        for _ in 0..QUEUE_CAPACITY + 44 {
            notifier.send(event(Kind::StepDone));
        }
        assert!(started.elapsed() < Duration::from_millis(500));
        assert_eq!(notifier.dropped(), 44);
        wait_until(|| notifier.delivered() == QUEUE_CAPACITY as u64).await;
        assert_eq!(notifier.failed(), 0);
    }

    #[tokio::test]
    async fn set_targets_redirects_later_events() {
        let first = Receiver::ok();
        let second = Receiver::ok();
        let notifier = start(vec![webhook("first", &first)]);
        notifier.send(event(Kind::Started));
        notifier.set_targets(vec![webhook("second", &second)]);
        notifier.send(event(Kind::Applied));
        wait_until(|| notifier.delivered() == 2).await;
        let to_first = first.requests();
        let to_second = second.requests();
        assert_eq!(to_first.len(), 1);
        assert_eq!(to_first[0].json()["kind"], "Started");
        assert_eq!(to_second.len(), 1);
        assert_eq!(to_second[0].json()["kind"], "Applied");
    }

    #[test]
    fn backoff_doubles_up_to_max_and_caps_retry_after() {
        let retry = Retry {
            attempts: 10,
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
        };
        let waits: Vec<u64> = (1..=7).map(|n| retry.delay(n, None).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(retry.delay(1, Some(Duration::from_secs(5))).as_secs(), 5);
        assert_eq!(retry.delay(1, Some(Duration::from_secs(600))).as_secs(), 30);
        assert_eq!(retry.delay(u32::MAX, None).as_secs(), 30);
        assert_eq!(
            Retry::default(),
            Retry {
                attempts: 5,
                ..retry
            }
        );
    }

    #[test]
    fn debug_output_hides_urls_and_tokens() {
        let target = Target::GitHubStatus {
            name: "github".to_owned(),
            api: "https://api.github.com".to_owned(),
            repository: "acme/shop".to_owned(),
            token: "ghp_secret".to_owned(),
        };
        assert_eq!(format!("{target:?}"), r#"GitHubStatus("github")"#);
    }

    #[test]
    fn only_full_hex_shas_are_commits() {
        assert!(is_commit_sha(SHA));
        assert!(!is_commit_sha("generation-3"));
        assert!(!is_commit_sha(&SHA[..39]));
        assert!(!is_commit_sha(&format!("{}g", &SHA[..39])));
        assert_eq!(short_revision("generation-3"), "generation-3");
    }

    #[test]
    fn slack_markup_is_escaped() {
        let mut e = event(Kind::Stalled);
        e.message = "<b> & co".to_owned();
        e.link = Some("https://x/a|b>".to_owned());
        assert_eq!(
            slack_text(&e),
            "camelk rollout shop/fleet 9f1c2d3e4f5a: stalled at step 2 of 3 (14 moved) - \
             &lt;b&gt; &amp; co <https://x/a%7Cb%3E|commit>"
        );
    }
}
