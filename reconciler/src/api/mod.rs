//! The `OperatorAssignment` API (`camelk.dev/v1alpha1`): which Camel K
//! operator owns which Camel K resource, as kept in Git.
//!
//! Contract:
//! - These types are the single description of the manifest. The CRD
//!   ([`crd`]), the unknown-field check of [`crate::manifest`] and the plan
//!   engine all derive from them; nothing else lists the fields.
//! - Precedence, for one resource in scope: its pin, else the first rule that
//!   matches it, else `defaultOperator`. A staged move (`stagedMoves`) then
//!   sends a resource whose rule or default owner is its `from` to its `to`;
//!   pins are never retargeted. So one resource has exactly one desired owner
//!   (see `crate::manifest::desired`). An Integration created by a Pipe in
//!   scope takes its Pipe's desired owner instead (see [`crate::plan`]).
//! - The types accept what parses; whether a manifest makes sense (known
//!   operator ids, unique pins, steps that grow) is
//!   `crate::manifest::validate`'s job.
//! - The status is defined here but filled by the reconciler, never by the
//!   plugin.

mod annotations;
mod approval;
mod operator_id;
mod outcome;
mod selector;
mod step;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use annotations::{RECONCILE_REQUEST_ANNOTATION, SUSPEND_ANNOTATION, is_suspended};
pub use approval::{RolloutApproval, RolloutApprovalSpec};
pub use operator_id::{InvalidOperatorId, OperatorId};
pub use outcome::{MigrationResult, RolloutState};
pub(crate) use selector::{LabelMatcher, NameGlob};
pub use selector::{Labels, SelectorError, glob_matches, parse_selector};
pub use step::{Step, StepError};

use crate::camel_k::CamelKind;

/// API group of the project's own kinds.
pub(crate) const GROUP: &str = "camelk.dev";
/// Served (and stored) version of `OperatorAssignment`.
pub(crate) const VERSION: &str = "v1alpha1";
/// Kind name of the manifest.
pub(crate) const KIND: &str = "OperatorAssignment";

/// The largest manifest read, in bytes: 1.5 MiB.
///
/// Why this value: the manifest becomes an `OperatorAssignment` object (the
/// sync applies it), and etcd refuses a request over its default
/// `--max-request-bytes` of 1.5 MiB, so a bigger manifest could never be
/// stored; no real assignment comes near it (a pin takes about 100 bytes:
/// 1.5 MiB is some 15,000 pins). Checked before a file or Git blob is read
/// whole, so a 50 MB file costs a `stat`, not 50 MB of memory and a parse.
pub const MAX_MANIFEST_BYTES: usize = 1536 * 1024;

/// Desired owners of Camel K resources, and how to move them.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "camelk.dev",
    version = "v1alpha1",
    kind = "OperatorAssignment",
    namespaced,
    status = "OperatorAssignmentStatus",
    shortname = "opa",
    category = "camelk",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".status.lastAppliedRevision"}"#,
    printcolumn = r#"{"name":"Default","type":"string","priority":1,"jsonPath":".spec.defaultOperator"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorAssignmentSpec {
    /// Every operator a resource may be assigned to.
    pub operators: Vec<Operator>,
    /// Which resources this assignment governs; default: every Camel K kind
    /// in every namespace.
    #[serde(default, skip_serializing_if = "Scope::is_everything")]
    pub scope: Scope,
    /// Owner of every resource in scope that no pin or rule assigns.
    pub default_operator: OperatorId,
    /// Ordered rules; the first that matches a resource decides its owner.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub rules: Vec<Rule>,
    /// Single resources assigned explicitly; a pin beats every rule.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub pins: Vec<Pin>,
    /// Moves of every resource of one operator (optionally a selected part)
    /// to another, in steps.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub staged_moves: Vec<StagedMove>,
    /// How moves are batched and gated.
    #[serde(default)]
    pub rollout: RolloutSettings,
    /// How one resource changes hands.
    #[serde(default)]
    pub handoff: HandoffSettings,
    /// What the reconciler does when an owner is changed by hand once a
    /// revision is applied: `revert` (default) or `report`.
    #[serde(default, skip_serializing_if = "DriftPolicy::is_default")]
    pub drift_policy: DriftPolicy,
    /// Where the rollout's progress is told (webhooks, Slack, Git commit
    /// statuses): started, step done, waiting for approval, stalled,
    /// rolled back, applied. A notification that fails is retried, and
    /// never holds the rollout.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub notifications: Vec<Notification>,
}

/// One receiver of the rollout's notifications: exactly one of `webhook`,
/// `slack`, `gitHubStatus`, `gitLabStatus`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// Its name, in logs and Events (never its URL or token).
    pub name: String,
    /// POST each notification as JSON to a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<UrlTarget>,
    /// POST a Slack incoming-webhook message (`{"text": ...}`) to a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<UrlTarget>,
    /// Set the commit status `camelk/rollout` of the revision on GitHub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_hub_status: Option<CommitStatusTarget>,
    /// Set the commit status `camelk/rollout` of the revision on GitLab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_lab_status: Option<CommitStatusTarget>,
}

/// A URL to POST to: written out, or (when it holds a secret, as Slack's
/// do) read from a Secret in the object's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UrlTarget {
    /// The URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The key of a Secret that holds the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_secret_ref: Option<SecretKeyRef>,
}

/// A Git host's commit status API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommitStatusTarget {
    /// Base URL of the API (`https://api.github.com`,
    /// `https://gitlab.example.com/api/v4`).
    pub api: String,
    /// GitHub: `owner/name`; GitLab: the project's id or URL-encoded path.
    pub repository: String,
    /// The key of a Secret that holds the API token.
    pub token_secret_ref: SecretKeyRef,
}

/// A key of a Secret in the `OperatorAssignment`'s namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key whose value is used.
    pub key: String,
}

/// What happens to a resource whose owner key was changed by hand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DriftPolicy {
    /// Moved back to the owner the manifest says, through a guarded handoff.
    #[default]
    Revert,
    /// Reported (condition `Drifted`, an Event) and left alone.
    Report,
}

impl DriftPolicy {
    fn is_default(&self) -> bool {
        *self == DriftPolicy::default()
    }
}

/// A Camel K operator that can own resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    /// Value of the `camel.apache.org/operator.id` label and annotation; also
    /// names the operator's lock (`<id>-lock`).
    pub id: OperatorId,
    /// Namespace the operator runs in (where its lock Lease lives).
    pub namespace: String,
    /// Whether the operator takes part in handoffs itself.
    #[serde(default)]
    pub protocol: Protocol,
    /// This upstream operator also reconciles resources that carry no owner
    /// key (upstream v2.10 does so when its id is `camel-k` or it is
    /// namespaced): an unowned resource with a phase is its work, and leaves
    /// it through the upstream release rule. At most one operator says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handles_unowned: bool,
}

impl OperatorAssignmentSpec {
    /// The upstream operator that reconciles resources with no owner key, if
    /// the manifest names one ([`Operator::handles_unowned`]).
    // Only the sync loop (feature `server`) calls this; the plugin builds without it.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn unowned_handler(&self) -> Option<&Operator> {
        self.operators.iter().find(|o| o.handles_unowned)
    }
}

/// How an operator releases a resource it owns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Protocol {
    /// Speaks the handoff protocol: releases a resource when asked.
    #[default]
    Handoff,
    /// A plain upstream Camel K operator that reads only the annotation; the
    /// reconciler releases on its behalf once the resource is in a stable phase.
    Upstream,
}

/// The resources an assignment governs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// Namespaces governed; empty means every namespace.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub namespaces: Vec<String>,
    /// Kinds governed; empty means every Camel K kind.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub kinds: Vec<CamelKind>,
}

impl Scope {
    pub(crate) fn is_everything(&self) -> bool {
        self.namespaces.is_empty() && self.kinds.is_empty()
    }

    /// Whether the scope includes `kind` (an empty kind list includes all).
    pub fn covers_kind(&self, kind: CamelKind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }

    pub(crate) fn covers_namespace(&self, namespace: &str) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace)
    }
}

/// Assigns every resource it matches (and no earlier rule matched) to `operator`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// A name for people and for the plan's "why" column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the rule matches; every criterion given must hold.
    #[serde(default, rename = "match")]
    pub matches: Match,
    /// The operator that gets what the rule matches.
    pub operator: OperatorId,
}

/// Criteria of a rule; an absent criterion matches everything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Match {
    /// Camel K kinds matched; empty: every kind.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub kinds: Vec<CamelKind>,
    /// Namespaces matched (exact names); empty: every namespace.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub namespaces: Vec<String>,
    /// Name globs: `*` matches any run of characters, `?` one character.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub names: Vec<String>,
    /// A Kubernetes label selector on the resource's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// One resource assigned explicitly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The resource's kind.
    pub kind: CamelKind,
    /// The resource's namespace.
    pub namespace: String,
    /// The resource's name.
    pub name: String,
    /// The operator that owns it.
    pub operator: OperatorId,
}

/// Moves the resources that rules or the default give to `from` over to
/// `to`, batch by batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagedMove {
    /// The operator whose resources move.
    pub from: OperatorId,
    /// The operator they move to.
    pub to: OperatorId,
    /// Only resources whose labels match; absent: all of `from`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Steps of this move; absent: `rollout.steps`.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub steps: Vec<Step>,
}

/// Batching and gating of moves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSettings {
    /// Cumulative targets: `10%` or a count of resources moved by the end of
    /// the step. A last step of `100%` is implied.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub steps: Vec<Step>,
    /// What must hold of the moved resources before the next step starts.
    #[serde(default)]
    pub health_gate: HealthGate,
    /// Wait between two steps, as a duration (`30s`, `5m`, `1h`).
    #[serde(default = "default_pause")]
    pub pause: String,
    /// Steps that start only once a person approves them.
    #[serde(default, skip_serializing_if = "Approval::is_empty")]
    pub approval: Approval,
    /// When steps may start: no step starts inside a `Deny` window, nor
    /// outside every `Allow` window when there is one. A step in progress
    /// finishes.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub windows: Vec<Window>,
}

/// A freeze window: open at each time of a cron schedule, for a duration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    /// `Deny` (no step starts while it is open) or `Allow` (steps start only
    /// while one is open).
    pub kind: WindowKind,
    /// When it opens: a standard 5-field cron schedule (minute hour
    /// day-of-month month day-of-week), in `timeZone`.
    pub schedule: String,
    /// How long it stays open each time (a duration: `8h`, `90m`).
    pub duration: String,
    /// The IANA time zone of the schedule (`Europe/Berlin`); absent: UTC.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub time_zone: String,
}

/// Whether a window forbids or permits starting steps while it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WindowKind {
    /// No step starts while the window is open.
    Deny,
    /// When any `Allow` window exists, steps start only while one is open.
    Allow,
}

/// Steps that wait for `kubectl camelk approve` before they start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Numbers of the plan's steps (from 1) that wait for an approval of
    /// their revision and step (a [`RolloutApproval`]) before they start.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub steps: Vec<u32>,
}

impl Approval {
    /// No step waits for approval.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Whether step `n` (from 1) waits for approval.
    pub fn requires(&self, n: u32) -> bool {
        self.steps.contains(&n)
    }
}

fn default_pause() -> String {
    "0s".into()
}

impl Default for RolloutSettings {
    fn default() -> Self {
        RolloutSettings {
            steps: Vec::new(),
            health_gate: HealthGate::default(),
            pause: default_pause(),
            approval: Approval::default(),
            windows: Vec::new(),
        }
    }
}

/// Health required of moved resources before a rollout advances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthGate {
    /// Integrations must report the `Ready` condition as `True`.
    #[serde(default = "yes")]
    pub require_ready: bool,
    /// How long moved resources may take to become healthy before the
    /// rollout stops (a duration).
    #[serde(default = "default_health_timeout")]
    pub timeout: String,
    /// What a failed gate does: `Pause` (default) or `Rollback`.
    #[serde(default)]
    pub on_failure: GateFailure,
    /// How long moved resources must stay healthy, once they all are,
    /// before the step is done (a duration; `0s`, the default: at once).
    /// One that fails during the soak fails the gate at once.
    #[serde(default = "default_soak", skip_serializing_if = "is_zero_soak")]
    pub soak: String,
    /// Metrics the step must keep within bounds once its moved resources
    /// are healthy (and soaked); a failed analysis hands the step's moves
    /// back to their former owners, whatever `onFailure` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
}

/// PromQL queries measured a number of times after a step, each result
/// held to a success condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Analysis {
    /// Base URL of the Prometheus HTTP API (`http://prometheus.monitoring:9090`).
    pub prometheus: String,
    /// Time between two measurements (a duration).
    #[serde(default = "default_analysis_interval")]
    pub interval: String,
    /// Measurements to take; the analysis passes once all are taken within
    /// the limits below.
    #[serde(default = "default_analysis_count")]
    pub count: u32,
    /// Measurements that may fail a query's condition; one more fails the
    /// analysis.
    #[serde(default)]
    pub failure_limit: u32,
    /// Measurements in a row that may end in an error (Prometheus
    /// unreachable, a query it refuses, no data); one more fails the analysis.
    #[serde(default = "default_consecutive_error_limit")]
    pub consecutive_error_limit: u32,
    /// The queries, all measured each time. `{{names}}`, `{{namespaces}}`
    /// and `{{operators}}` in a query stand for the step's moved resources'
    /// names, namespaces and new operators, as a regular expression
    /// alternation (`a|b`), for `=~`.
    #[serde(deserialize_with = "list")]
    pub queries: Vec<AnalysisQuery>,
}

/// One PromQL query of an [`Analysis`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisQuery {
    /// Its name, in status and messages.
    pub name: String,
    /// The PromQL query (an instant query).
    pub query: String,
    /// What each sample of the result must satisfy: `result` compared with
    /// a number (`result < 0.05`, `result >= 1`; `<`, `<=`, `>`, `>=`,
    /// `==`, `!=`).
    pub success_condition: String,
}

fn default_analysis_interval() -> String {
    "30s".into()
}

fn default_analysis_count() -> u32 {
    5
}

fn default_consecutive_error_limit() -> u32 {
    4
}

fn default_soak() -> String {
    "0s".into()
}

fn is_zero_soak(soak: &String) -> bool {
    *soak == default_soak()
}

/// What happens when a step's moved resources are not healthy in time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum GateFailure {
    /// The rollout pauses; a later round checks the step's health again.
    #[default]
    Pause,
    /// The step's moved resources are handed back to where they came from,
    /// and the rollout waits for a new revision.
    Rollback,
}

fn yes() -> bool {
    true
}

fn default_health_timeout() -> String {
    "10m".into()
}

impl Default for HealthGate {
    fn default() -> Self {
        HealthGate {
            require_ready: true,
            timeout: default_health_timeout(),
            on_failure: GateFailure::default(),
            soak: default_soak(),
            analysis: None,
        }
    }
}

/// How a single resource changes hands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffSettings {
    /// How long the current owner may take to release (a duration).
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout: String,
    /// Whether a release that stalls past the drain timeout may be forced.
    #[serde(default)]
    pub force: ForcePolicy,
    /// How long after the drain timeout a stalled release is forced
    /// (`force: AfterTimeout` only; a duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_after: Option<String>,
}

fn default_drain_timeout() -> String {
    "5m".into()
}

impl Default for HandoffSettings {
    fn default() -> Self {
        HandoffSettings {
            drain_timeout: default_drain_timeout(),
            force: ForcePolicy::default(),
            force_after: None,
        }
    }
}

/// Whether a stalled release may be forced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ForcePolicy {
    /// Never: a stalled handoff is reported and waits for a person.
    #[default]
    Never,
    /// Once `forceAfter` has passed beyond the drain timeout.
    AfterTimeout,
}

/// Progress reported by `reconciler sync`: revisions, conditions, the
/// rollout in progress, owner counts and the history of migrations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorAssignmentStatus {
    /// `metadata.generation` of the spec this status was written for;
    /// `-1` ([`NOT_OBSERVED`]) until the reconciler has seen the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Version of the `reconciler` that wrote this status (what
    /// `kubectl camelk version` reports as the running reconciler's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciler_version: Option<String>,
    /// The revision whose rollout finished last (a commit SHA or `generation-<N>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// The revision the last round worked on, applied or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// Conditions `Ready`, `Reconciling`, `Stalled`, `Suspended`, `Drifted` and
    /// `WaitingForApproval`,
    /// in the Kubernetes condition format.
    #[serde(
        default,
        deserialize_with = "list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// Resources per current owner.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// Where the rollout of the last attempted revision stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// The last migrations, newest first (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<MigrationRecord>,
    /// Value of the last sync request (annotation
    /// `camelk.dev/reconcile-requested-at`) a round finished handling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

/// Progress of the staged rollout of one revision, as `reconciler sync`
/// records it after every step (it keeps no other state).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Commit the rollout executes.
    pub revision: String,
    /// Steps of the rollout's plan.
    pub total_steps: u32,
    /// Step being executed or waited on (from 1; 0 before the first).
    pub current_step: u32,
    /// Last step whose moves were all done and found healthy.
    pub completed_steps: u32,
    /// `Progressing`, `WaitingForHealth`, `Pausing`, `WaitingForApproval`,
    /// `WaitingForWindow`, `Paused`, `RolledBack`, `Complete`.
    #[schemars(with = "String")]
    pub state: RolloutState,
    /// Why the rollout is in its state, for people; empty when nothing to say.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Moved resources that failed the health gate, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// The operator the paused step waits for because its lock was not
    /// seen renewing (condition reason `TargetNotAlive`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_not_alive: Option<String>,
    /// When the last step passed its health gate (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_completed_at: Option<String>,
    /// When the step now waited on first started (RFC 3339); kept across
    /// rounds and restarts so the health gate can tell a status the new
    /// owner wrote from one left by the old owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_started_at: Option<String>,
    /// When the health gate of the step now waited on began (RFC 3339): it
    /// fails at this time plus `healthGate.timeout`, however many rounds
    /// it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_started_at: Option<String>,
    /// When every moved resource of the step now waited on was first found
    /// healthy (RFC 3339): the soak (`healthGate.soak`) counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_started_at: Option<String>,
    /// When the next step may start, while a freeze window holds it
    /// (`WaitingForWindow`; RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step_at: Option<String>,
    /// The metric analysis of the step now waited on
    /// (`healthGate.analysis`), while it runs or once it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisStatus>,
}

/// Where a step's metric analysis stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisStatus {
    /// Measurements taken.
    pub measurements: u32,
    /// Measurements in which a query failed its condition.
    pub failures: u32,
    /// Measurements in a row that ended in an error.
    pub consecutive_errors: u32,
    /// When the last measurement was taken (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_measured_at: Option<String>,
    /// What the last measurement found, per query, for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last: Vec<String>,
}

/// One revision's migration, for `status.history`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationRecord {
    /// The revision the migration applies.
    pub revision: String,
    /// When the migration started (RFC 3339).
    pub started_at: String,
    /// When it ended (RFC 3339); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Resources moved from one operator to another.
    pub moves: u64,
    /// Resources given a first owner.
    pub first_assignments: u64,
    /// Rollout steps of the migration.
    pub steps: u32,
    /// The commit's author (Git source only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// The first line of the commit's message (Git source only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// With `--source cluster`: the Git revision reported by the Flux
    /// Kustomization or Argo CD Application that applied the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_revision: Option<String>,
    /// That Kustomization or Application (`Kustomization flux-system/apps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_by: Option<String>,
    /// `Progressing`, `Paused` (a gate or a handoff holds it; it goes on from
    /// there), `RolledBack`, `Succeeded`, `Superseded`.
    #[schemars(with = "String")]
    pub result: MigrationResult,
    /// The approvals its steps started on, in step order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRecord>,
}

/// Who let a step start, for `status.history`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    /// The step approved (from 1).
    pub step: u32,
    /// The user who approved it, as the API server named them.
    pub approver: String,
    /// When the approval was created (RFC 3339).
    pub approved_at: String,
}

/// The generated CustomResourceDefinition of `OperatorAssignment`.
///
/// A new object reads back with `status.observedGeneration: -1` (a schema
/// default): the reconciler has not seen it yet. Readers of status
/// conventions (kstatus, so a Flux Kustomization's `wait`) then find it in
/// progress instead of taking an object with no status for ready.
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;
    use kube::CustomResourceExt;
    let mut crd = OperatorAssignment::crd();
    for version in &mut crd.spec.versions {
        if let Some(status) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("status"))
        {
            status.default = Some(JSON(
                serde_json::json!({ "observedGeneration": NOT_OBSERVED }),
            ));
        }
    }
    crd
}

/// `status.observedGeneration` of an object the reconciler has not seen yet.
pub const NOT_OBSERVED: i64 = -1;

/// A list that may be written empty as `key:` (null), which Kubernetes
/// treats as absent.
fn list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// The generated CRD of `RolloutApproval`.
fn approval_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    RolloutApproval::crd()
}

/// Every CRD of the project: `OperatorAssignment`, then `RolloutApproval`.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    vec![crd(), approval_crd()]
}

/// One generated CRD as YAML, as committed in `examples/deploy/crds/`.
pub fn crd_file(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> String {
    serde_saphyr::to_string(crd).expect("a CRD serializes")
}

/// Every generated CRD as one YAML stream, as `reconciler crds` prints it.
pub fn crd_yaml() -> String {
    crds()
        .iter()
        .map(crd_file)
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Parses a duration as Kubernetes writes one (Go's `time.ParseDuration`,
/// through kube's [`kube::core::Duration`]): `90s`, `5m`, `1h30m`, `1.5h`,
/// `300ms`. A negative duration is refused.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    // kube reads an empty text, or a unit with no number (`m`), as zero; Go
    // (and so Kubernetes) refuses both.
    // kube panics on a number too large for a Duration (`1m4444…`, found by
    // fuzzing); no real one needs more than 9 digits a number or 64 characters.
    if text.is_empty() || text.len() > 64 {
        return None;
    }
    let mut after_digit = false;
    let mut digits = 0;
    for c in text.chars() {
        if c.is_alphabetic() && !after_digit {
            return None;
        }
        digits = if c.is_ascii_digit() { digits + 1 } else { 0 };
        if digits > 9 {
            return None;
        }
        after_digit = c.is_ascii_digit() || (c.is_alphabetic() && after_digit);
    }
    let duration: kube::core::Duration = text.parse().ok()?;
    (!duration.is_negative()).then(|| duration.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_too_large_for_a_duration_are_refused_not_a_panic() {
        // The fuzzer's finds (fuzz/seeds/manifest/crash-duration-overflow.yaml).
        assert_eq!(parse_duration(&format!("1m{}", "4".repeat(120))), None);
        assert_eq!(parse_duration(&format!("5m{}h999", "9".repeat(60))), None);
        assert_eq!(parse_duration("9999999999h"), None);
        assert_eq!(parse_duration(&"1h".repeat(40)), None, "over 64 characters");
        assert_eq!(
            parse_duration("999999999h"),
            Some(std::time::Duration::from_secs(999_999_999 * 3600))
        );
        assert_eq!(
            parse_duration("0.123456789s"),
            Some(std::time::Duration::from_nanos(123_456_789))
        );
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("90s"),
            Some(std::time::Duration::from_secs(90))
        );
        assert_eq!(
            parse_duration("1h30m"),
            Some(std::time::Duration::from_secs(5400))
        );
        assert_eq!(
            parse_duration("1.5h"),
            Some(std::time::Duration::from_secs(5400)),
            "Kubernetes-style fractions"
        );
        assert_eq!(
            parse_duration("300ms"),
            Some(std::time::Duration::from_millis(300))
        );
        assert_eq!(parse_duration("-5m"), None);
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("5 m"), None);
        assert_eq!(parse_duration("m"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn crd_names_the_project_group() {
        let crd = crd();
        assert_eq!(crd.spec.group, GROUP);
        assert_eq!(crd.spec.versions[0].name, VERSION);
        assert_eq!(crd.spec.names.kind, KIND);
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("operatorassignments.camelk.dev")
        );
    }
}
