//! Checks of a parsed `OperatorAssignment` that types cannot express.
//!
//! Contract: `validate` is pure; it returns every finding, each with the
//! path of the offending value, so the caller can point at `line:column`.
//! Errors make a manifest unusable; warnings (a rule that can never match, a
//! setting that has no effect) do not.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::diagnostic::{Severity, hint};
use super::tree::FieldPath;
use crate::api::{
    ForcePolicy, Match, OperatorAssignmentSpec, OperatorId, Pin, Protocol, Step, parse_duration,
};
use crate::camel_k::CamelKind;

/// One problem, at a path of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    /// Whether it stops the manifest from being used.
    pub(crate) severity: Severity,
    /// Where it is in the document.
    pub(crate) path: FieldPath,
    /// What is wrong, for people.
    pub(crate) message: String,
}

struct Findings(Vec<Finding>);

impl Findings {
    fn error(&mut self, path: FieldPath, message: impl Into<String>) {
        self.0.push(Finding {
            severity: Severity::Error,
            path,
            message: message.into(),
        });
    }

    fn warning(&mut self, path: FieldPath, message: impl Into<String>) {
        self.0.push(Finding {
            severity: Severity::Warning,
            path,
            message: message.into(),
        });
    }
}

/// Every finding about `spec`, in document order of the checks.
pub(crate) fn validate(spec: &OperatorAssignmentSpec) -> Vec<Finding> {
    let root = FieldPath::root().key("spec");
    let mut out = Findings(Vec::new());

    check_operators(&mut out, &root.key("operators"), spec);
    let known = KnownOperators::of(spec);

    let scope = root.key("scope");
    check_namespaces(&mut out, &scope.key("namespaces"), &spec.scope.namespaces);
    check_unique_kinds(&mut out, &scope.key("kinds"), &spec.scope.kinds);

    known.check(
        &mut out,
        root.key("defaultOperator"),
        &spec.default_operator,
    );
    check_rules(&mut out, &root.key("rules"), spec, &known);
    check_pins(&mut out, &root.key("pins"), spec, &known);
    check_staged_moves(&mut out, &root.key("stagedMoves"), spec, &known);
    check_rollout_and_handoff(&mut out, &root, spec);
    check_notifications(&mut out, &root.key("notifications"), &spec.notifications);
    out.0
}

/// `spec.operators`: at least one, unique ids, one handler of unowned
/// resources at most (and an upstream one), valid namespaces.
fn check_operators(out: &mut Findings, operators: &FieldPath, spec: &OperatorAssignmentSpec) {
    if spec.operators.is_empty() {
        out.error(
            operators.clone(),
            "declare at least one operator in `spec.operators`",
        );
    }
    let mut first_seen: HashMap<&OperatorId, usize> = HashMap::new();
    for (i, operator) in spec.operators.iter().enumerate() {
        if let Some(first) = first_seen.get(&operator.id) {
            out.error(
                operators.index(i).key("id"),
                format!(
                    "operator id `{}` is declared twice (first as spec.operators[{first}]); ids must be unique",
                    operator.id
                ),
            );
        } else {
            first_seen.insert(&operator.id, i);
        }
        if operator.handles_unowned {
            if operator.protocol != Protocol::Upstream {
                out.error(
                    operators.index(i).key("handlesUnowned"),
                    format!(
                        "operator `{}` speaks the handoff protocol and selects its resources by label, so it never handles unowned ones; `handlesUnowned` is for `protocol: Upstream` operators",
                        operator.id
                    ),
                );
            }
            if let Some(first) = spec.operators[..i].iter().position(|o| o.handles_unowned) {
                out.error(
                    operators.index(i).key("handlesUnowned"),
                    format!(
                        "only one operator may handle unowned resources; spec.operators[{first}] ({}) already does",
                        spec.operators[first].id
                    ),
                );
            }
        }
        if !is_dns_label(&operator.namespace) {
            out.error(
                operators.index(i).key("namespace"),
                format!("`{}` is not a valid namespace name (lowercase letters, digits and `-`, at most 63)", operator.namespace),
            );
        }
    }
}

/// The operator ids `spec.operators` declares, against which every other
/// reference to an operator is checked.
struct KnownOperators<'a> {
    ids: Vec<&'a str>,
}

impl<'a> KnownOperators<'a> {
    fn of(spec: &'a OperatorAssignmentSpec) -> KnownOperators<'a> {
        let mut ids: Vec<&str> = spec.operators.iter().map(|o| o.id.as_str()).collect();
        ids.dedup();
        KnownOperators { ids }
    }

    fn contains(&self, id: &OperatorId) -> bool {
        self.ids.contains(&id.as_str())
    }

    /// An error at `path` unless `id` is declared.
    fn check(&self, out: &mut Findings, path: FieldPath, id: &OperatorId) {
        if !self.contains(id) {
            out.error(
                path,
                format!(
                    "unknown operator `{id}`{}; declared operators: {}",
                    hint(id.as_str(), self.ids.iter().copied()),
                    if self.ids.is_empty() {
                        "none".to_string()
                    } else {
                        self.ids.join(", ")
                    }
                ),
            );
        }
    }
}

/// `spec.rules`: known operators, valid matches, and a warning for a rule
/// that can never match.
fn check_rules(
    out: &mut Findings,
    rules: &FieldPath,
    spec: &OperatorAssignmentSpec,
    known: &KnownOperators<'_>,
) {
    for (i, rule) in spec.rules.iter().enumerate() {
        let path = rules.index(i);
        known.check(out, path.key("operator"), &rule.operator);
        let matches = path.key("match");
        check_namespaces(out, &matches.key("namespaces"), &rule.matches.namespaces);
        for (j, glob) in rule.matches.names.iter().enumerate() {
            if glob.is_empty() {
                out.error(
                    matches.key("names").index(j),
                    "empty name pattern: use `*` to match every name",
                );
            }
        }
        if let Some(selector) = &rule.matches.selector {
            check_selector(out, &matches.key("selector"), selector);
        }
        if let Some(reason) = never_matches(spec, i) {
            out.warning(path, format!("this rule can never match: {reason}"));
        }
    }
}

/// `spec.pins`: each valid, in scope, and no resource pinned twice.
fn check_pins(
    out: &mut Findings,
    pins: &FieldPath,
    spec: &OperatorAssignmentSpec,
    known: &KnownOperators<'_>,
) {
    let mut pinned: HashMap<(CamelKind, &str, &str), usize> = HashMap::new();
    for (i, pin) in spec.pins.iter().enumerate() {
        // Paths are built only for a pin with a finding: there are many pins.
        let valid = known.contains(&pin.operator)
            && !pin.name.is_empty()
            && is_dns_label(&pin.namespace)
            && spec.scope.covers_kind(pin.kind)
            && spec.scope.covers_namespace(&pin.namespace);
        if valid {
            let key = (pin.kind, pin.namespace.as_str(), pin.name.as_str());
            if let std::collections::hash_map::Entry::Vacant(first) = pinned.entry(key) {
                first.insert(i);
                continue;
            }
        }
        let path = pins.index(i);
        check_pin(out, &path, spec, known, pin);
        let key = (pin.kind, pin.namespace.as_str(), pin.name.as_str());
        if let Some(first) = pinned.get(&key) {
            out.error(
                path,
                format!(
                    "{} {}/{} is pinned twice (first as spec.pins[{first}]); a resource has exactly one owner",
                    pin.kind, pin.namespace, pin.name
                ),
            );
        } else {
            pinned.insert(key, i);
        }
    }
}

/// The findings of one pin on its own (not against the other pins).
fn check_pin(
    out: &mut Findings,
    path: &FieldPath,
    spec: &OperatorAssignmentSpec,
    known: &KnownOperators<'_>,
    pin: &Pin,
) {
    known.check(out, path.key("operator"), &pin.operator);
    if pin.name.is_empty() {
        out.error(path.key("name"), "a pin needs the name of a resource");
    }
    if !is_dns_label(&pin.namespace) {
        out.error(
            path.key("namespace"),
            format!("`{}` is not a valid namespace name", pin.namespace),
        );
    }
    if !spec.scope.covers_kind(pin.kind) {
        out.error(
            path.key("kind"),
            format!(
                "pin to kind `{}`, which is outside the scope (spec.scope.kinds: {}); add the kind to the scope or remove the pin",
                pin.kind,
                spec.scope.kinds.iter().map(|k| k.kind()).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    if !spec.scope.covers_namespace(&pin.namespace) {
        out.error(
            path.key("namespace"),
            format!(
                "pin in namespace `{}`, which is outside the scope (spec.scope.namespaces)",
                pin.namespace
            ),
        );
    }
}

/// `spec.stagedMoves`: known operators, a real move, a valid selector and
/// steps.
fn check_staged_moves(
    out: &mut Findings,
    moves: &FieldPath,
    spec: &OperatorAssignmentSpec,
    known: &KnownOperators<'_>,
) {
    for (i, staged) in spec.staged_moves.iter().enumerate() {
        let path = moves.index(i);
        known.check(out, path.key("from"), &staged.from);
        known.check(out, path.key("to"), &staged.to);
        if staged.from == staged.to {
            out.error(
                path.key("to"),
                format!(
                    "a staged move from `{}` to itself moves nothing",
                    staged.from
                ),
            );
        }
        if let Some(selector) = &staged.selector {
            check_selector(out, &path.key("selector"), selector);
        }
        check_steps(out, &path.key("steps"), &staged.steps);
    }
}

/// `spec.notifications`: unique names, one receiver each, http(s) URLs.
fn check_notifications(
    out: &mut Findings,
    path: &FieldPath,
    notifications: &[crate::api::Notification],
) {
    let mut names = BTreeSet::new();
    let is_http = |url: &str| {
        (url.starts_with("http://") || url.starts_with("https://"))
            && !url.contains(char::is_whitespace)
    };
    for (i, n) in notifications.iter().enumerate() {
        let at = path.index(i);
        if !names.insert(&n.name) {
            out.error(
                at.key("name"),
                format!("notification `{}` is named twice", n.name),
            );
        }
        let receivers = [
            n.webhook.is_some(),
            n.slack.is_some(),
            n.git_hub_status.is_some(),
            n.git_lab_status.is_some(),
        ];
        if receivers.iter().filter(|r| **r).count() != 1 {
            out.error(
                at.key("name"),
                format!(
                    "notification `{}` names one of webhook, slack, gitHubStatus, gitLabStatus",
                    n.name
                ),
            );
        }
        for (key, target) in [("webhook", &n.webhook), ("slack", &n.slack)] {
            let Some(target) = target else { continue };
            match (&target.url, &target.url_secret_ref) {
                (Some(url), None) if !is_http(url) => out.error(
                    at.key(key).key("url"),
                    format!("`{url}` is not an http:// or https:// URL"),
                ),
                (Some(_), None) | (None, Some(_)) => {}
                _ => out.error(at.key(key), "name one of url, urlSecretRef"),
            }
        }
        for (key, target) in [
            ("gitHubStatus", &n.git_hub_status),
            ("gitLabStatus", &n.git_lab_status),
        ] {
            if let Some(target) = target
                && !is_http(&target.api)
            {
                out.error(
                    at.key(key).key("api"),
                    format!("`{}` is not an http:// or https:// URL", target.api),
                );
            }
        }
    }
}

/// `spec.rollout` and `spec.handoff`: steps and durations.
fn check_rollout_and_handoff(out: &mut Findings, root: &FieldPath, spec: &OperatorAssignmentSpec) {
    let rollout = root.key("rollout");
    check_steps(out, &rollout.key("steps"), &spec.rollout.steps);
    check_duration(out, rollout.key("pause"), &spec.rollout.pause);
    check_duration(
        out,
        rollout.key("healthGate").key("timeout"),
        &spec.rollout.health_gate.timeout,
    );
    check_duration(
        out,
        rollout.key("healthGate").key("soak"),
        &spec.rollout.health_gate.soak,
    );
    check_approval_steps(
        out,
        &rollout.key("approval").key("steps"),
        &spec.rollout.approval.steps,
    );
    check_windows(out, &rollout.key("windows"), &spec.rollout.windows);
    if let Some(analysis) = &spec.rollout.health_gate.analysis {
        check_analysis(out, &rollout.key("healthGate").key("analysis"), analysis);
    }

    let handoff = root.key("handoff");
    check_duration(
        out,
        handoff.key("drainTimeout"),
        &spec.handoff.drain_timeout,
    );
    if let Some(after) = &spec.handoff.force_after {
        check_duration(out, handoff.key("forceAfter"), after);
        if spec.handoff.force == ForcePolicy::Never {
            out.warning(
                handoff.key("forceAfter"),
                "`forceAfter` has no effect while `force` is `Never`",
            );
        }
    }
}

fn check_steps(out: &mut Findings, path: &FieldPath, steps: &[Step]) {
    let mut previous: Option<Step> = None;
    for (i, step) in steps.iter().enumerate() {
        let at = path.index(i);
        match *step {
            Step::Count(0) | Step::Percent(0) => {
                out.error(
                    at,
                    format!("empty rollout step `{step}`: a step must move at least one resource"),
                );
                continue;
            }
            Step::Percent(p) if p > 100 => {
                out.error(at, format!("rollout step `{step}` is over 100%"));
                continue;
            }
            _ => {}
        }
        if let Some(before) = previous {
            let grows = match (before, *step) {
                (Step::Count(a), Step::Count(b)) | (Step::Percent(a), Step::Percent(b)) => b > a,
                _ => true,
            };
            if !grows {
                out.error(
                    at,
                    format!("rollout step `{step}` does not go beyond the step before it (`{before}`); steps are cumulative"),
                );
            }
        }
        previous = Some(*step);
    }
}

/// Steps that wait for approval: numbered from 1, each once.
fn check_approval_steps(out: &mut Findings, path: &FieldPath, steps: &[u32]) {
    let mut seen = BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        if *step == 0 {
            out.error(
                path.index(i),
                "steps are numbered from 1: approval of step `0` names no step",
            );
        } else if !seen.insert(step) {
            out.warning(path.index(i), format!("step `{step}` is listed twice"));
        }
    }
}

/// Freeze windows: a cron schedule of 5 fields, a duration over zero, a
/// known time zone.
fn check_windows(out: &mut Findings, path: &FieldPath, windows: &[crate::api::Window]) {
    for (i, window) in windows.iter().enumerate() {
        let at = path.index(i);
        check_duration(out, at.key("duration"), &window.duration);
        if let Err(Some(e)) = crate::manifest::windows::compile(window) {
            out.error(at.key(e.field()), e.to_string());
        }
    }
}

/// A metric analysis: a Prometheus URL, an interval, at least one
/// measurement, and queries with unique names and conditions that parse.
fn check_analysis(out: &mut Findings, path: &FieldPath, analysis: &crate::api::Analysis) {
    let url = &analysis.prometheus;
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || url.contains(char::is_whitespace)
    {
        out.error(
            path.key("prometheus"),
            format!("`{url}` is not an http:// or https:// URL of Prometheus"),
        );
    }
    check_duration(out, path.key("interval"), &analysis.interval);
    if analysis.count == 0 {
        out.error(
            path.key("count"),
            "an analysis takes at least one measurement",
        );
    }
    if analysis.queries.is_empty() {
        out.error(path.key("queries"), "an analysis needs at least one query");
    }
    let mut names = BTreeSet::new();
    for (i, query) in analysis.queries.iter().enumerate() {
        let at = path.key("queries").index(i);
        if !names.insert(&query.name) {
            out.error(
                at.key("name"),
                format!("query `{}` is named twice", query.name),
            );
        }
        if query.query.trim().is_empty() {
            out.error(at.key("query"), "an empty query");
        }
        if let Err(e) = crate::manifest::analysis::Condition::parse(&query.success_condition) {
            out.error(at.key("successCondition"), e.to_string());
        }
    }
}

fn check_duration(out: &mut Findings, path: FieldPath, text: &str) {
    if parse_duration(text).is_none() {
        out.error(
            path,
            format!("`{text}` is not a duration; write for example `30s`, `5m` or `1h30m`"),
        );
    }
}

fn check_namespaces(out: &mut Findings, path: &FieldPath, namespaces: &[String]) {
    let mut seen = BTreeSet::new();
    for (i, namespace) in namespaces.iter().enumerate() {
        if !is_dns_label(namespace) {
            out.error(
                path.index(i),
                format!("`{namespace}` is not a valid namespace name"),
            );
        } else if !seen.insert(namespace) {
            out.warning(
                path.index(i),
                format!("namespace `{namespace}` is listed twice"),
            );
        }
    }
}

fn check_unique_kinds(out: &mut Findings, path: &FieldPath, kinds: &[CamelKind]) {
    let mut seen = BTreeSet::new();
    for (i, kind) in kinds.iter().enumerate() {
        if !seen.insert(kind) {
            out.warning(path.index(i), format!("kind `{kind}` is listed twice"));
        }
    }
}

fn check_selector(out: &mut Findings, path: &FieldPath, selector: &LabelSelector) {
    for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let at = path.key("matchExpressions").index(i);
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => out.error(
                at.key("values"),
                format!(
                    "operator `{}` needs at least one value",
                    requirement.operator
                ),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.error(
                at.key("values"),
                format!("operator `{}` takes no values", requirement.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.error(
                at.key("operator"),
                format!(
                    "unknown selector operator `{other}`{}; use In, NotIn, Exists or DoesNotExist",
                    hint(other, ["In", "NotIn", "Exists", "DoesNotExist"])
                ),
            ),
        }
    }
}

/// Why rule `index` can never decide an owner, if it cannot.
fn never_matches(spec: &OperatorAssignmentSpec, index: usize) -> Option<String> {
    let rule = &spec.rules[index];
    let m = &rule.matches;
    if !m.kinds.is_empty()
        && !spec.scope.kinds.is_empty()
        && !m.kinds.iter().any(|k| spec.scope.kinds.contains(k))
    {
        return Some("none of its kinds is in spec.scope.kinds".into());
    }
    if !m.namespaces.is_empty()
        && !spec.scope.namespaces.is_empty()
        && !m
            .namespaces
            .iter()
            .any(|n| spec.scope.namespaces.contains(n))
    {
        return Some("none of its namespaces is in spec.scope.namespaces".into());
    }
    spec.rules[..index]
        .iter()
        .position(|earlier| covers(&earlier.matches, m))
        .map(|earlier| {
            format!("spec.rules[{earlier}] matches every resource it matches, and comes first")
        })
}

/// Whether every resource `inner` matches is matched by `outer`.
fn covers(outer: &Match, inner: &Match) -> bool {
    let list =
        |o: &[_], i: &[_]| o.is_empty() || (!i.is_empty() && i.iter().all(|x| o.contains(x)));
    let kinds = outer.kinds.is_empty()
        || (!inner.kinds.is_empty() && inner.kinds.iter().all(|k| outer.kinds.contains(k)));
    // A literal inner name is covered by any outer glob matching it; an inner
    // glob only by the same glob (glob containment in general is not checked).
    let names = outer.names.is_empty()
        || (!inner.names.is_empty()
            && inner.names.iter().all(|n| {
                outer.names.iter().any(|g| {
                    g == n
                        || g == "*"
                        || (!n.contains(['*', '?']) && crate::api::glob_matches(g, n))
                })
            }));
    let selector = match (&outer.selector, &inner.selector) {
        (None, _) => true,
        (Some(o), Some(i)) => o == i,
        (Some(o), None) => {
            o.match_labels.as_ref().is_none_or(|l| l.is_empty())
                && o.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        }
    };
    kinds && list(&outer.namespaces, &inner.namespaces) && names && selector
}

/// An RFC 1123 subdomain, as Kubernetes requires of most object names:
/// dot-separated parts shaped like labels, 253 characters at most.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(label_shaped)
}

/// An RFC 1123 label, as Kubernetes requires of namespace names.
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && label_shaped(name)
}

/// Lowercase letters, digits and `-`, not starting or ending with `-`.
fn label_shaped(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}
