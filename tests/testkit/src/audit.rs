//! Reading the API server's audit log, the judge of who wrote what.
//!
//! The local control plane logs `RequestResponse` for writes to the
//! `camel.apache.org` and `coordination.k8s.io` groups and `Metadata` for the
//! rest (read bodies made the log of a 1,000-resource world 12 times bigger,
//! and no test reads them), one JSON event per line, written synchronously
//! (the log backend's blocking mode), so a request that has been answered is
//! already in the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

/// The Deployments that got a new ReplicaSet in `events`, with how many,
/// from the deployment controller's successful creates (a ReplicaSet is
/// named after its Deployment and its pod template's hash).
pub fn replica_sets_created(events: &[AuditEvent]) -> BTreeMap<String, usize> {
    let mut created = BTreeMap::new();
    for e in events {
        let Some(object) = &e.object_ref else {
            continue;
        };
        if object.resource != "replicasets" || e.verb != "create" || !e.is_successful_write() {
            continue;
        }
        if let Some((deployment, _hash)) = object.name.as_deref().and_then(|n| n.rsplit_once('-')) {
            *created.entry(deployment.to_string()).or_default() += 1;
        }
    }
    created
}

/// The audit policy the local control plane runs with.
pub const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - group: camel.apache.org
      - group: coordination.k8s.io
  - level: Metadata
";

/// The fields of an `audit.k8s.io/v1` Event that tests look at.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub level: String,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: String,
    pub verb: String,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub user: UserInfo,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    #[serde(default)]
    pub request_object: Option<serde_json::Value>,
    #[serde(default)]
    pub response_object: Option<serde_json::Value>,
    #[serde(default)]
    pub request_received_timestamp: Option<String>,
    #[serde(default)]
    pub stage_timestamp: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub api_group: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: Option<u16>,
}

impl AuditEvent {
    /// When the API server received the request (`requestReceivedTimestamp`).
    pub fn received_at(&self) -> Option<Timestamp> {
        self.request_received_timestamp.as_deref()?.parse().ok()
    }

    /// When the API server logged this stage (`stageTimestamp`): for
    /// `ResponseComplete`, once the answer was sent.
    pub fn completed_at(&self) -> Option<Timestamp> {
        self.stage_timestamp.as_deref()?.parse().ok()
    }

    /// The HTTP status the API server answered with, if the stage records one.
    pub fn code(&self) -> Option<u16> {
        self.response_status.as_ref().and_then(|s| s.code)
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object_ref.as_ref()?.namespace.as_deref()
    }

    pub fn resource(&self) -> Option<&str> {
        self.object_ref.as_ref().map(|o| o.resource.as_str())
    }

    /// True for a write verb that the API server accepted (2xx).
    pub fn is_successful_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        ) && self.code().is_some_and(|c| (200..300).contains(&c))
            && !self.is_dry_run()
    }

    /// The resource written, when this is a completed, successful write to a
    /// Camel K resource in `namespace`.
    pub fn camel_write_in(&self, namespace: &str) -> Option<&ObjectRef> {
        self.object_ref.as_ref().filter(|o| {
            o.api_group.as_deref() == Some("camel.apache.org")
                && o.namespace.as_deref() == Some(namespace)
                && self.stage == "ResponseComplete"
                && self.is_successful_write()
        })
    }

    /// A `dryRun=All` request: admitted and answered, but nothing stored.
    pub fn is_dry_run(&self) -> bool {
        self.request_uri
            .split_once('?')
            .is_some_and(|(_, query)| query.split('&').any(|p| p.starts_with("dryRun=")))
    }
}

/// The audit log file of one control plane.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    pub fn new(path: impl Into<PathBuf>) -> AuditLog {
        AuditLog { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every complete event in the log. A last line without its newline is
    /// still being written and is skipped; any other unreadable line is an error.
    pub fn events(&self) -> std::io::Result<Vec<AuditEvent>> {
        let text = std::fs::read_to_string(&self.path)?;
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        complete
            .lines()
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_str(line).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}:{}: {e}", self.path.display(), i + 1),
                    )
                })
            })
            .collect()
    }

    /// Events about objects in `namespace`, the usual scope of one test.
    pub fn events_in(&self, namespace: &str) -> std::io::Result<Vec<AuditEvent>> {
        Ok(self
            .events()?
            .into_iter()
            .filter(|e| e.namespace() == Some(namespace))
            .collect())
    }

    /// [`AuditLog::events_in`] `namespace` of requests `user` made.
    pub fn events_by(&self, namespace: &str, user: &str) -> std::io::Result<Vec<AuditEvent>> {
        let mut events = self.events_in(namespace)?;
        events.retain(|e| e.user.username == user);
        Ok(events)
    }
}

/// One API request as the audit log records it, without its request and
/// response objects: enough to count traffic by user, verb and resource.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRequest {
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: String,
    pub verb: String,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub user: UserInfo,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
}

impl AuditRequest {
    pub fn resource(&self) -> Option<&str> {
        self.object_ref.as_ref().map(|o| o.resource.as_str())
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object_ref.as_ref()?.namespace.as_deref()
    }

    /// True for exactly one event of each request: the `ResponseStarted`
    /// stage of a watch (it is logged when the watch opens; its
    /// `ResponseComplete` when it ends), the `ResponseComplete` of the rest.
    pub fn is_request_start(&self) -> bool {
        if self.verb == "watch" {
            self.stage == "ResponseStarted"
        } else {
            self.stage == "ResponseComplete"
        }
    }
}

impl AuditLog {
    /// The offset just past the last complete event: a mark to count from
    /// with [`AuditLog::requests_since`]. 0 when there is no log yet.
    pub fn mark(&self) -> std::io::Result<u64> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut end = file.metadata()?.len();
        let mut chunk = vec![0u8; 64 * 1024];
        while end > 0 {
            let start = end.saturating_sub(chunk.len() as u64);
            let part = &mut chunk[..(end - start) as usize];
            file.seek(SeekFrom::Start(start))?;
            file.read_exact(part)?;
            if let Some(i) = part.iter().rposition(|b| *b == b'\n') {
                return Ok(start + i as u64 + 1);
            }
            end = start;
        }
        Ok(0)
    }

    /// The events logged from offset `from` (a [`AuditLog::mark`]) on, read
    /// as [`AuditRequest`]s (objects skipped, so huge list responses stay
    /// cheap), and the offset past the last complete one. A last line
    /// without its newline is still being written and is left for later.
    pub fn requests_since(&self, from: u64) -> std::io::Result<(Vec<AuditRequest>, u64)> {
        use std::io::{BufRead, Seek, SeekFrom};
        let mut file = std::fs::File::open(&self.path)?;
        file.seek(SeekFrom::Start(from))?;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let mut offset = from;
        let mut requests = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            let request = serde_json::from_slice(&line).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} at byte {offset}: {e}", self.path.display()),
                )
            })?;
            requests.push(request);
            offset += n as u64;
        }
        Ok((requests, offset))
    }
}

/// etcd's revision now, in the order resourceVersions count (a list's
/// resourceVersion is the revision it was read at): a point to judge an
/// audit log's writes from ([`single_owner_violations_after`]).
pub async fn current_revision(client: &kube::Client) -> Result<u64, kube::Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let list = kube::Api::<Namespace>::all(client.clone())
        .list(&kube::api::ListParams::default().limit(1))
        .await?;
    Ok(list
        .metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .expect("a list carries the resourceVersion it was read at"))
}

/// Label and annotation key naming a Camel K resource's operator.
const OWNER_KEY: &str = "camel.apache.org/operator.id";

/// The owner an object names by the project's one rule: its label, else its
/// annotation (as `kamel` writes it).
fn owner_of(object: &serde_json::Value) -> Option<String> {
    let key = |map: &str| object.get("metadata")?.get(map)?.get(OWNER_KEY)?.as_str();
    camelk_reconciler::camel_k::owner_from_keys(key("labels"), key("annotations")).map(|o| o.id)
}

fn resource_version(object: &serde_json::Value) -> Option<u64> {
    object
        .get("metadata")?
        .get("resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

/// Field managers of this project's writes of owner keys: the handoff's
/// flips, the sync's, the plugin's.
const COORDINATOR_MANAGERS: [&str; 3] = ["camelk-handoff", "camelk-reconciler", "kubectl-camelk"];

/// Whether `object`, as a write by `writer` left it, is owned by `writer`
/// with every owner key it carries managed by a coordinator alone. An update
/// takes over the fields whose value it changes, so that write did not touch
/// the keys: `writer` owned the object before it, as a coordinator had made
/// it.
fn kept_coordinators_keys(object: &serde_json::Value, writer: &str) -> bool {
    if owner_of(object).as_deref() != Some(writer) {
        return false;
    }
    let field = format!("f:{OWNER_KEY}");
    let managed_fields = object["metadata"]["managedFields"].as_array();
    ["labels", "annotations"]
        .into_iter()
        .filter(|map| object["metadata"][map].get(OWNER_KEY).is_some())
        .all(|map| {
            let managers: Vec<&str> = managed_fields
                .into_iter()
                .flatten()
                .filter(|m| {
                    m["fieldsV1"]["f:metadata"][format!("f:{map}")]
                        .get(&field)
                        .is_some()
                })
                .filter_map(|m| m["manager"].as_str())
                .collect();
            !managers.is_empty() && managers.iter().all(|m| COORDINATOR_MANAGERS.contains(m))
        })
}

/// The owner label value a JSON patch request tests, if it tests one.
fn tested_owner(event: &AuditEvent) -> Option<String> {
    tested_key(event, "labels")
}

/// The value a JSON patch request tests at `/metadata/<map>/<owner key>`.
fn tested_key(event: &AuditEvent, map: &str) -> Option<String> {
    let path = format!("/metadata/{map}/{}", OWNER_KEY.replace('/', "~1"));
    event
        .request_object
        .as_ref()?
        .as_array()?
        .iter()
        .find(|op| op["op"] == "test" && op["path"] == path.as_str())?
        .get("value")?
        .as_str()
        .map(str::to_string)
}

/// When each fenced change of owner `from` → `to` of a Camel K resource in
/// `namespace` reached the API server: resource name → the flip's
/// `requestReceivedTimestamp`. A flip is a successful JSON patch that tested
/// the owner key it was read from (the label; the annotation for a resource
/// `kamel` created) equal to `from` and left the object owned by `to`.
pub fn owner_flips(
    events: &[AuditEvent],
    namespace: &str,
    from: &str,
    to: &str,
) -> BTreeMap<String, Timestamp> {
    let mut flips = BTreeMap::new();
    for e in events {
        let Some(obj_ref) = e.camel_write_in(namespace) else {
            continue;
        };
        let tested = tested_key(e, "labels").or_else(|| tested_key(e, "annotations"));
        let after = e.response_object.as_ref().and_then(owner_of);
        if tested.as_deref() != Some(from) || after.as_deref() != Some(to) {
            continue;
        }
        if let (Some(name), Some(at)) = (&obj_ref.name, e.received_at()) {
            flips.insert(name.clone(), at);
        }
    }
    flips
}

/// The unowned window of each flipped resource its new owner acted on: from
/// the moment the API server received the flip (`flips`, as [`owner_flips`]
/// gives them) to the new owner's first act on it (`first_acts`), by name.
/// A flip is received before it commits, so a window errs long, never short.
/// A resource missing from either map has no window.
pub fn unowned_windows(
    flips: &BTreeMap<String, Timestamp>,
    first_acts: &BTreeMap<String, Timestamp>,
) -> Vec<Duration> {
    flips
        .iter()
        .filter_map(|(name, flipped)| {
            let gap = first_acts.get(name)?.duration_since(*flipped);
            Some(Duration::try_from(gap).unwrap_or(Duration::ZERO))
        })
        .collect()
}

/// The `q` quantile (`0.0..=1.0`) of `values` by nearest rank; `None` when empty.
pub fn quantile(values: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.max(1) - 1).copied()
}

/// The single-owner judge: every successful write to a Camel K resource in
/// `namespace` by an identity in `operators` must come from the operator the
/// owner label named just before that write (for a create: the one the new
/// object names). Writes of each object are ordered by the resourceVersion
/// they produced, which is etcd's commit order. Returns one line per violation.
pub fn single_owner_violations(
    events: &[AuditEvent],
    namespace: &str,
    operators: &[&str],
) -> Vec<String> {
    single_owner_violations_with(events, namespace, operators, None)
}

/// The successful writes to each Camel K resource of `namespace`, in commit
/// order (the resourceVersion each produced): (resource, name) → [(rv,
/// event, object after the write)].
type Histories<'a> = BTreeMap<(String, String), Vec<(u64, &'a AuditEvent, serde_json::Value)>>;

fn write_histories<'a>(events: &'a [AuditEvent], namespace: &str) -> Histories<'a> {
    let mut writes: Histories<'a> = BTreeMap::new();
    for e in events {
        let Some(obj_ref) = e.camel_write_in(namespace) else {
            continue;
        };
        let Some(response) = e.response_object.clone() else {
            continue;
        };
        let Some(rv) = resource_version(&response) else {
            continue;
        };
        let name = obj_ref
            .name
            .clone()
            .or_else(|| response["metadata"]["name"].as_str().map(str::to_string))
            .unwrap_or_default();
        writes
            .entry((obj_ref.resource.clone(), name))
            .or_default()
            .push((rv, e, response));
    }
    for history in writes.values_mut() {
        history.sort_by_key(|(rv, _, _)| *rv);
    }
    writes
}

/// [`single_owner_violations`] where `unowned_handler` (an upstream operator
/// that reconciles resources with no owner key) may also write a resource
/// that has no owner.
pub fn single_owner_violations_with(
    events: &[AuditEvent],
    namespace: &str,
    operators: &[&str],
    unowned_handler: Option<&str>,
) -> Vec<String> {
    single_owner_violations_after(events, namespace, operators, unowned_handler, 0)
}

/// [`single_owner_violations_with`], reporting only the writes committed
/// after resourceVersion `after_revision`; the writes before it still say who owned
/// what. For a cluster whose history several checks judge in turn.
pub fn single_owner_violations_after(
    events: &[AuditEvent],
    namespace: &str,
    operators: &[&str],
    unowned_handler: Option<&str>,
    after_revision: u64,
) -> Vec<String> {
    let mut violations = Vec::new();
    for ((resource, name), history) in write_histories(events, namespace) {
        let mut owner: Option<String> = None;
        for (rv, event, response) in history {
            let writer = event.user.username.as_str();
            let is_operator = operators.contains(&writer);
            let after = owner_of(&response);
            let named = if event.verb == "create" {
                after.as_deref()
            } else {
                owner.as_deref()
            };
            // A JSON patch that tested the owner label equal to its writer and
            // succeeded proves the writer owned the object when it was applied
            // (the API server applies a patch's `test` atomically): it stands
            // even when the history lacks the write that made it the owner
            // (a request whose client was killed mid-way is logged as a 500
            // although etcd committed it).
            // So does a write that left its owner keys naming its writer as
            // a coordinator had set them: an API server killed after committing
            // that flip and before logging it loses the flip from the history.
            let entitled = named == Some(writer)
                || (named.is_none() && unowned_handler == Some(writer))
                || tested_owner(event).as_deref() == Some(writer)
                || kept_coordinators_keys(&response, writer);
            if is_operator && !entitled && rv > after_revision {
                violations.push(format!(
                    "{resource}/{name}: {} by {writer} at resourceVersion {rv} while the owner was {}",
                    event.verb,
                    owner.as_deref().unwrap_or("nobody")
                ));
            }
            owner = after;
        }
    }
    violations
}

/// Whether `event` made its object (a create, or a server-side apply that
/// created it: a patch answered 201); an object of the same name made again
/// starts a history of its own.
fn made(event: &AuditEvent) -> bool {
    event.verb == "create" || event.code() == Some(201)
}

/// Writes that took a Camel K resource of `namespace` from an owner to none,
/// from the upstream operators' point of view (they read the annotation
/// only): its owner annotation removed. One line per such write.
pub fn owner_annotation_losses(events: &[AuditEvent], namespace: &str) -> Vec<String> {
    let annotation = |object: &serde_json::Value| {
        object["metadata"]["annotations"][OWNER_KEY]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let mut losses = Vec::new();
    for ((resource, name), history) in write_histories(events, namespace) {
        let mut before: Option<String> = None;
        for (rv, event, response) in history {
            let after = annotation(&response);
            if let (Some(owner), None, false) = (&before, &after, made(event)) {
                losses.push(format!(
                    "{resource}/{name}: its owner annotation ({owner}) removed by {} ({}) at resourceVersion {rv}",
                    event.user.username, event.verb
                ));
            }
            before = after;
        }
    }
    losses
}

/// Writes that changed the owner of a Camel K resource of `namespace` (by
/// the one rule) made by someone not in `coordinators`: a GitOps tool
/// setting a key back, a hand edit. One line per such write.
pub fn owner_changes_by_others(
    events: &[AuditEvent],
    namespace: &str,
    coordinators: &[&str],
) -> Vec<String> {
    let mut changes = Vec::new();
    for ((resource, name), history) in write_histories(events, namespace) {
        let mut before: Option<String> = None;
        for (rv, event, response) in history {
            let after = owner_of(&response);
            let writer = event.user.username.as_str();
            if !made(event) && after != before && !coordinators.contains(&writer) {
                changes.push(format!(
                    "{resource}/{name}: owner {} -> {} by {writer} at resourceVersion {rv}",
                    before.as_deref().unwrap_or("nobody"),
                    after.as_deref().unwrap_or("nobody")
                ));
            }
            before = after;
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(user: &str, verb: &str, owner_after: &str, rv: u64) -> AuditEvent {
        serde_json::from_value(serde_json::json!({
            "level": "RequestResponse", "auditID": format!("{rv}"), "stage": "ResponseComplete",
            "verb": verb, "requestURI": "/x", "user": { "username": user },
            "objectRef": { "resource": "integrations", "namespace": "ns", "name": "orders", "apiGroup": "camel.apache.org" },
            "responseStatus": { "code": 200 },
            "responseObject": { "metadata": { "name": "orders", "resourceVersion": rv.to_string(),
                "labels": { OWNER_KEY: owner_after } } }
        }))
        .unwrap()
    }

    /// `write` whose owner keys (both set to `owner_after`) were last set
    /// by field manager `keys_by`.
    fn write_with_keys_by(user: &str, owner_after: &str, rv: u64, keys_by: &str) -> AuditEvent {
        let mut event = write(user, "update", owner_after, rv);
        let object = event.response_object.as_mut().unwrap();
        object["metadata"]["annotations"] = serde_json::json!({ OWNER_KEY: owner_after });
        let keys = serde_json::json!({ format!("f:{OWNER_KEY}"): {} });
        object["metadata"]["managedFields"] = serde_json::json!([
            { "manager": "kamel", "operation": "Update", "fieldsV1": { "f:spec": {} } },
            { "manager": keys_by, "operation": "Update",
              "fieldsV1": { "f:metadata": { "f:labels": keys, "f:annotations": keys } } },
        ]);
        event
    }

    #[test]
    fn a_flip_missing_from_the_log_is_read_from_the_keys_managers() {
        let ops = ["operator-1", "operator-2"];
        // operator-1 owns it; the handoff's flip to operator-2 was committed
        // but not logged (the API server was killed); operator-2 then writes.
        let lost_flip = vec![
            write("operator-1", "create", "operator-1", 10),
            write_with_keys_by("operator-2", "operator-2", 12, "camelk-handoff"),
        ];
        assert!(single_owner_violations(&lost_flip, "ns", &ops).is_empty());
        // The same write, had it set the keys itself, takes over the owner.
        let taken = vec![
            write("operator-1", "create", "operator-1", 10),
            write_with_keys_by("operator-2", "operator-2", 12, "kamel"),
        ];
        assert_eq!(single_owner_violations(&taken, "ns", &ops).len(), 1);
        // Keys a coordinator set to someone else do not entitle the writer.
        let other = vec![
            write("operator-1", "create", "operator-1", 10),
            write_with_keys_by("operator-2", "operator-1", 12, "camelk-handoff"),
        ];
        assert_eq!(single_owner_violations(&other, "ns", &ops).len(), 1);
    }

    #[test]
    fn requests_since_a_mark_skip_objects_and_a_line_being_written() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!(
            "camelk-audit-test-{}",
            crate::identity::random_hex(4).unwrap()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let log = AuditLog::new(dir.join("audit.log"));
        assert_eq!(log.mark().unwrap(), 0);
        let line = |id: &str, verb: &str, stage: &str| {
            format!(
                "{{\"level\":\"RequestResponse\",\"auditID\":\"{id}\",\"stage\":\"{stage}\",\"verb\":\"{verb}\",\
                 \"requestURI\":\"/apis/camel.apache.org/v1/integrations\",\"user\":{{\"username\":\"reconciler\"}},\
                 \"responseStatus\":{{\"code\":200}},\"responseObject\":{{\"items\":[{{\"a\":1}}]}}}}\n"
            )
        };
        let mut file = std::fs::File::create(log.path()).unwrap();
        file.write_all(line("1", "list", "ResponseComplete").as_bytes())
            .unwrap();
        let mark = log.mark().unwrap();
        file.write_all(line("2", "watch", "ResponseStarted").as_bytes())
            .unwrap();
        file.write_all(line("3", "get", "ResponseComplete").as_bytes())
            .unwrap();
        file.write_all(b"{\"level\":\"Requ").unwrap();
        assert_eq!(
            log.mark().unwrap(),
            std::fs::metadata(log.path()).unwrap().len() - 14
        );
        let (requests, next) = log.requests_since(mark).unwrap();
        let ids: Vec<_> = requests.iter().map(|r| r.audit_id.as_str()).collect();
        assert_eq!(ids, ["2", "3"]);
        assert!(requests.iter().all(|r| r.is_request_start()));
        assert_eq!(next, log.mark().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn at(micros: i64) -> Timestamp {
        Timestamp::from_microsecond(1_800_000_000_000_000 + micros).unwrap()
    }

    /// A fenced flip `from` → `to` of `name`, received at `received` µs.
    fn flip_event(name: &str, from: &str, to: &str, key: &str, received: i64) -> AuditEvent {
        let mut e = write("operator-1", "patch", to, 9);
        let obj_ref = e.object_ref.as_mut().unwrap();
        obj_ref.name = Some(name.into());
        e.request_object = Some(serde_json::json!([
            { "op": "test", "path": format!("/metadata/{key}/camel.apache.org~1operator.id"), "value": from },
            { "op": "add", "path": "/metadata/labels/camel.apache.org~1operator.id", "value": to }
        ]));
        e.request_received_timestamp = Some(at(received).to_string());
        e
    }

    #[test]
    fn flips_are_fenced_owner_changes_timed_when_received() {
        let mut refused = flip_event("c", "operator-1", "operator-2", "labels", 30);
        refused.response_status = Some(ResponseStatus { code: Some(422) });
        let mut status_write = write("operator-1", "patch", "operator-1", 4);
        status_write.request_received_timestamp = Some(at(40).to_string());
        let events = vec![
            flip_event("a", "operator-1", "operator-2", "labels", 10),
            flip_event("b", "operator-1", "operator-2", "annotations", 20),
            refused,
            flip_event("d", "operator-3", "operator-2", "labels", 50),
            status_write,
        ];
        let flips = owner_flips(&events, "ns", "operator-1", "operator-2");
        assert_eq!(
            flips,
            BTreeMap::from([("a".to_string(), at(10)), ("b".to_string(), at(20))])
        );
        assert!(owner_flips(&events, "other", "operator-1", "operator-2").is_empty());
    }

    #[test]
    fn a_window_runs_from_the_flip_to_the_first_act() {
        let flips = BTreeMap::from([
            ("a".to_string(), at(1_000)),
            ("b".to_string(), at(2_000)),
            ("never-acted".to_string(), at(3_000)),
        ]);
        let acts = BTreeMap::from([
            ("a".to_string(), at(1_250)),
            ("b".to_string(), at(1_900)),
            ("not-flipped".to_string(), at(0)),
        ]);
        let windows = unowned_windows(&flips, &acts);
        // An act stamped before the flip (clock granularity) counts as no window.
        assert_eq!(windows, [Duration::from_micros(250), Duration::ZERO]);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let ms: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(quantile(&ms, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(quantile(&ms, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(quantile(&ms, 1.0), Some(Duration::from_millis(100)));
        assert_eq!(quantile(&ms, 0.0), Some(Duration::from_millis(1)));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn owner_writes_and_flips_are_allowed() {
        let events = vec![
            write("admin", "create", "operator-1", 1),
            write("operator-1", "patch", "operator-1", 2),
            write("operator-1", "patch", "operator-2", 3),
            write("operator-2", "patch", "operator-2", 4),
        ];
        assert!(single_owner_violations(&events, "ns", &["operator-1", "operator-2"]).is_empty());
    }

    #[test]
    fn a_write_whose_fence_tested_its_writer_as_owner_stands_despite_a_gap() {
        // The flip to operator-2 is missing from the log (its client was
        // killed: logged as a 500). operator-2's next write tested the label.
        let mut fenced = write("operator-2", "patch", "operator-2", 5);
        fenced.request_object = Some(serde_json::json!([
            { "op": "test", "path": "/metadata/labels/camel.apache.org~1operator.id", "value": "operator-2" },
            { "op": "add", "path": "/status", "value": {} }
        ]));
        let events = vec![write("admin", "create", "operator-1", 1), fenced.clone()];
        assert!(single_owner_violations(&events, "ns", &["operator-1", "operator-2"]).is_empty());
        // The same write without the fence is judged by the history.
        let mut unfenced = fenced.clone();
        unfenced.request_object = Some(serde_json::json!({ "status": {} }));
        let events = vec![write("admin", "create", "operator-1", 1), unfenced];
        assert_eq!(
            single_owner_violations(&events, "ns", &["operator-1", "operator-2"]).len(),
            1
        );
        // A fence naming someone else entitles nobody.
        let mut other = fenced;
        other.request_object = Some(serde_json::json!([
            { "op": "test", "path": "/metadata/labels/camel.apache.org~1operator.id", "value": "operator-1" }
        ]));
        let events = vec![write("admin", "create", "operator-1", 1), other];
        assert_eq!(
            single_owner_violations(&events, "ns", &["operator-1", "operator-2"]).len(),
            1
        );
    }

    #[test]
    fn a_write_by_the_former_owner_is_a_violation_in_commit_order() {
        // Logged out of order: the resourceVersion decides.
        let events = vec![
            write("operator-1", "patch", "operator-2", 5),
            write("admin", "create", "operator-1", 1),
            write("operator-1", "patch", "operator-2", 3),
        ];
        let v = single_owner_violations(&events, "ns", &["operator-1", "operator-2"]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("resourceVersion 5") && v[0].contains("owner was operator-2"),
            "{v:?}"
        );
    }

    #[test]
    fn a_dry_run_stores_nothing_so_it_is_no_write() {
        let mut dry = write("operator-2", "patch", "operator-2", 2);
        dry.request_uri =
            "/apis/camel.apache.org/v1/namespaces/ns/integrations/orders?dryRun=All&fieldManager=x"
                .into();
        assert!(dry.is_dry_run() && !dry.is_successful_write());
        let events = vec![write("admin", "create", "operator-1", 1), dry];
        assert!(single_owner_violations(&events, "ns", &["operator-1", "operator-2"]).is_empty());
        assert!(write("operator-1", "patch", "operator-1", 3).is_successful_write());
    }

    /// A write whose object names its owner the way `kamel` does: the
    /// annotation alone (`None`: no owner key at all).
    fn kamel_write(user: &str, verb: &str, annotation: Option<&str>, rv: u64) -> AuditEvent {
        let mut e = write(user, verb, "x", rv);
        let meta = &mut e.response_object.as_mut().unwrap()["metadata"];
        meta.as_object_mut().unwrap().remove("labels");
        if let Some(owner) = annotation {
            meta["annotations"] = serde_json::json!({ OWNER_KEY: owner });
        }
        e
    }

    #[test]
    fn an_owner_annotation_removed_is_a_loss_and_a_change_by_another_is_named() {
        let mut created = kamel_write("kustomize-controller", "patch", Some("operator-1"), 1);
        // Flux creates by server-side apply: a patch answered 201.
        created.response_status = Some(ResponseStatus { code: Some(201) });
        let events = vec![
            created,
            kamel_write("camelk-handoff", "patch", Some("operator-2"), 2),
            // A GitOps tool sets the key back, then stops applying it.
            kamel_write("kustomize-controller", "patch", Some("operator-1"), 3),
            kamel_write("kustomize-controller", "patch", None, 4),
        ];
        let losses = owner_annotation_losses(&events, "ns");
        assert_eq!(losses.len(), 1, "{losses:?}");
        assert!(losses[0].contains("(operator-1) removed by kustomize-controller"));
        let changes = owner_changes_by_others(&events, "ns", &["camelk-handoff"]);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(changes[0].contains("owner operator-2 -> operator-1 by kustomize-controller"));
        assert!(changes[1].contains("owner operator-1 -> nobody"));
        assert!(owner_annotation_losses(&events[..3], "ns").is_empty());
    }

    #[test]
    fn an_annotation_names_the_owner_when_there_is_no_label() {
        let ops = ["operator-1", "operator-2"];
        let events = vec![
            kamel_write("developer", "create", Some("operator-1"), 1),
            kamel_write("operator-1", "patch", Some("operator-1"), 2),
            kamel_write("operator-2", "patch", Some("operator-1"), 3),
        ];
        let v = single_owner_violations(&events, "ns", &ops);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("by operator-2") && v[0].contains("owner was operator-1"));
    }

    #[test]
    fn only_the_unowned_handler_may_write_a_resource_with_no_owner() {
        let ops = ["operator-1", "operator-2"];
        let events = vec![
            kamel_write("developer", "create", None, 1),
            kamel_write("operator-1", "patch", None, 2),
            kamel_write("operator-2", "patch", None, 3),
        ];
        let v = single_owner_violations_with(&events, "ns", &ops, Some("operator-1"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("by operator-2") && v[0].contains("owner was nobody"));
        assert_eq!(single_owner_violations(&events, "ns", &ops).len(), 2);
    }

    #[test]
    fn a_judge_from_a_revision_on_reports_later_writes_and_knows_earlier_owners() {
        let ops = ["operator-1", "operator-2"];
        let events = vec![
            kamel_write("developer", "create", Some("operator-1"), 1),
            kamel_write("operator-2", "patch", Some("operator-1"), 2),
            kamel_write("operator-1", "patch", Some("operator-1"), 3),
            kamel_write("operator-2", "patch", Some("operator-1"), 4),
        ];
        let v = single_owner_violations_after(&events, "ns", &ops, None, 2);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("resourceVersion 4"), "{v:?}");
        assert_eq!(single_owner_violations(&events, "ns", &ops).len(), 2);
    }
}
