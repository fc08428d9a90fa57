//! `OperatorAssignment` manifests for tests, built from typed parts instead
//! of YAML text copied from test to test.
//!
//! [`Assignment`] renders the manifest a person would write: block style,
//! two-space indentation, keys in the order of `examples/operator-assignment.yaml`
//! (operators, scope, defaultOperator, driftPolicy, rules, pins, stagedMoves,
//! rollout, handoff), and only the fields a test set, so every default stays
//! the library's. Each field is on its own line; a test that needs the line of
//! a field finds it in the rendered text.
//!
//! The builder checks nothing: a test may render a manifest the reconciler
//! refuses (an unknown operator, a bad duration) to see it refused.
//!
//! ```
//! use camelk_reconciler::camel_k::CamelKind;
//! use camelk_testkit::manifest::{Assignment, Rollout};
//!
//! let text = Assignment::new("fleet")
//!     .operator("operator-1", "apps")
//!     .operator("operator-2", "apps")
//!     .scope(&["apps"], &[CamelKind::Integration])
//!     .default_operator("operator-1")
//!     .staged_move("operator-1", "operator-2", &["50%", "100%"])
//!     .rollout(Rollout::new().gate_timeout("90s"))
//!     .drain_timeout("2m")
//!     .render();
//! assert!(text.contains("      steps: [\"50%\", \"100%\"]\n"));
//! ```

use std::fmt::{self, Write};

use camelk_reconciler::camel_k::CamelKind;

/// An `OperatorAssignment` manifest (`camelk.dev/v1alpha1`).
#[derive(Clone, Debug)]
pub struct Assignment {
    name: String,
    operators: Vec<Operator>,
    scope: Option<(Vec<String>, Vec<CamelKind>)>,
    default_operator: Option<String>,
    drift_policy: Option<String>,
    rules: Vec<Rule>,
    pins: Vec<Pin>,
    staged_moves: Vec<StagedMove>,
    rollout: Option<Rollout>,
    drain_timeout: Option<String>,
}

/// One entry of `spec.operators`.
#[derive(Clone, Debug)]
pub struct Operator {
    id: String,
    namespace: String,
    protocol: Option<String>,
    handles_unowned: bool,
}

/// One entry of `spec.rules`: resources its `match` selects go to `operator`.
#[derive(Clone, Debug)]
pub struct Rule {
    name: Option<String>,
    kinds: Vec<CamelKind>,
    namespaces: Vec<String>,
    names: Vec<String>,
    operator: String,
}

#[derive(Clone, Debug)]
struct Pin {
    kind: CamelKind,
    namespace: String,
    name: String,
    operator: String,
}

#[derive(Clone, Debug)]
struct StagedMove {
    from: String,
    to: String,
    steps: Vec<String>,
}

/// `spec.rollout`: batching, health gate and pause.
#[derive(Clone, Debug, Default)]
pub struct Rollout {
    steps: Vec<String>,
    require_ready: Option<bool>,
    gate_timeout: Option<String>,
    on_failure: Option<String>,
    soak: Option<String>,
    pause: Option<String>,
    approval_steps: Vec<u32>,
    /// `windows`: kind, schedule, duration, time zone.
    windows: Vec<[String; 4]>,
    /// `healthGate.analysis`, as one flow mapping.
    analysis: Option<String>,
}

impl Assignment {
    /// An assignment named `name`, with nothing in its spec yet.
    pub fn new(name: &str) -> Assignment {
        Assignment {
            name: name.into(),
            operators: Vec::new(),
            scope: None,
            default_operator: None,
            drift_policy: None,
            rules: Vec::new(),
            pins: Vec::new(),
            staged_moves: Vec::new(),
            rollout: None,
            drain_timeout: None,
        }
    }

    /// Adds operator `id`, its lock in `namespace`, with the default protocol.
    pub fn operator(self, id: &str, namespace: &str) -> Assignment {
        self.with_operator(Operator::new(id, namespace))
    }

    /// Adds operator `id`, its lock in `namespace`, with `protocol: Upstream`.
    pub fn upstream_operator(self, id: &str, namespace: &str) -> Assignment {
        self.with_operator(Operator::new(id, namespace).upstream())
    }

    /// Adds `operator` as it is configured.
    pub fn with_operator(mut self, operator: Operator) -> Assignment {
        self.operators.push(operator);
        self
    }

    /// `spec.scope`: these namespaces and kinds only.
    pub fn scope(mut self, namespaces: &[&str], kinds: &[CamelKind]) -> Assignment {
        self.scope = Some((strings(namespaces), kinds.to_vec()));
        self
    }

    /// `spec.defaultOperator`.
    pub fn default_operator(mut self, id: &str) -> Assignment {
        self.default_operator = Some(id.into());
        self
    }

    /// `spec.driftPolicy` (`revert` or `report`).
    pub fn drift_policy(mut self, policy: &str) -> Assignment {
        self.drift_policy = Some(policy.into());
        self
    }

    /// Appends `rule` to `spec.rules` (the first that matches decides).
    pub fn rule(mut self, rule: Rule) -> Assignment {
        self.rules.push(rule);
        self
    }

    /// Pins `kind` `namespace/name` to `operator`.
    pub fn pin(
        mut self,
        kind: CamelKind,
        namespace: &str,
        name: &str,
        operator: &str,
    ) -> Assignment {
        self.pins.push(Pin {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            operator: operator.into(),
        });
        self
    }

    /// A staged move of everything `from` owns to `to`, in `steps`
    /// (percentages or counts, as written: `"50%"`, `"3"`).
    pub fn staged_move(mut self, from: &str, to: &str, steps: &[&str]) -> Assignment {
        self.staged_moves.push(StagedMove {
            from: from.into(),
            to: to.into(),
            steps: strings(steps),
        });
        self
    }

    /// `spec.rollout`.
    pub fn rollout(mut self, rollout: Rollout) -> Assignment {
        self.rollout = Some(rollout);
        self
    }

    /// `spec.handoff.drainTimeout` (a duration).
    pub fn drain_timeout(mut self, timeout: &str) -> Assignment {
        self.drain_timeout = Some(timeout.into());
        self
    }

    /// The manifest as YAML text.
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        writeln!(out, "apiVersion: camelk.dev/v1alpha1")?;
        writeln!(out, "kind: OperatorAssignment")?;
        writeln!(out, "metadata:")?;
        writeln!(out, "  name: {}", scalar(&self.name))?;
        writeln!(out, "spec:")?;
        if !self.operators.is_empty() {
            writeln!(out, "  operators:")?;
        }
        for op in &self.operators {
            writeln!(out, "    - id: {}", scalar(&op.id))?;
            writeln!(out, "      namespace: {}", scalar(&op.namespace))?;
            if let Some(protocol) = &op.protocol {
                writeln!(out, "      protocol: {}", scalar(protocol))?;
            }
            if op.handles_unowned {
                writeln!(out, "      handlesUnowned: true")?;
            }
        }
        if let Some((namespaces, kinds)) = &self.scope {
            writeln!(out, "  scope:")?;
            if !namespaces.is_empty() {
                writeln!(out, "    namespaces: {}", flow(namespaces))?;
            }
            if !kinds.is_empty() {
                writeln!(out, "    kinds: {}", flow(&kind_names(kinds)))?;
            }
        }
        if let Some(id) = &self.default_operator {
            writeln!(out, "  defaultOperator: {}", scalar(id))?;
        }
        if let Some(policy) = &self.drift_policy {
            writeln!(out, "  driftPolicy: {}", scalar(policy))?;
        }
        if !self.rules.is_empty() {
            writeln!(out, "  rules:")?;
        }
        for rule in &self.rules {
            // The first key of the entry carries the list's dash.
            let mut dash = "    - ";
            if let Some(name) = &rule.name {
                writeln!(out, "{dash}name: {}", scalar(name))?;
                dash = "      ";
            }
            writeln!(out, "{dash}match:")?;
            if !rule.kinds.is_empty() {
                writeln!(out, "        kinds: {}", flow(&kind_names(&rule.kinds)))?;
            }
            if !rule.namespaces.is_empty() {
                writeln!(out, "        namespaces: {}", flow(&rule.namespaces))?;
            }
            if !rule.names.is_empty() {
                writeln!(out, "        names: {}", flow(&rule.names))?;
            }
            writeln!(out, "      operator: {}", scalar(&rule.operator))?;
        }
        if !self.pins.is_empty() {
            writeln!(out, "  pins:")?;
        }
        for pin in &self.pins {
            writeln!(out, "    - kind: {}", pin.kind.kind())?;
            writeln!(out, "      namespace: {}", scalar(&pin.namespace))?;
            writeln!(out, "      name: {}", scalar(&pin.name))?;
            writeln!(out, "      operator: {}", scalar(&pin.operator))?;
        }
        if !self.staged_moves.is_empty() {
            writeln!(out, "  stagedMoves:")?;
        }
        for staged in &self.staged_moves {
            writeln!(out, "    - from: {}", scalar(&staged.from))?;
            writeln!(out, "      to: {}", scalar(&staged.to))?;
            writeln!(out, "      steps: {}", flow(&staged.steps))?;
        }
        if let Some(rollout) = &self.rollout {
            writeln!(out, "  rollout:")?;
            if !rollout.steps.is_empty() {
                writeln!(out, "    steps: {}", flow(&rollout.steps))?;
            }
            let gate = [
                rollout.require_ready.map(|r| format!("requireReady: {r}")),
                rollout
                    .gate_timeout
                    .as_ref()
                    .map(|t| format!("timeout: {}", scalar(t))),
                rollout
                    .on_failure
                    .as_ref()
                    .map(|o| format!("onFailure: {}", scalar(o))),
                rollout
                    .soak
                    .as_ref()
                    .map(|t| format!("soak: {}", scalar(t))),
                rollout.analysis.as_ref().map(|a| format!("analysis: {a}")),
            ];
            if gate.iter().any(Option::is_some) {
                writeln!(out, "    healthGate:")?;
                for line in gate.iter().flatten() {
                    writeln!(out, "      {line}")?;
                }
            }
            if let Some(pause) = &rollout.pause {
                writeln!(out, "    pause: {}", scalar(pause))?;
            }
            if !rollout.windows.is_empty() {
                writeln!(out, "    windows:")?;
                for [kind, schedule, duration, time_zone] in &rollout.windows {
                    writeln!(
                        out,
                        "    - {{kind: {kind}, schedule: {}, duration: {}, timeZone: {}}}",
                        serde_json::to_string(schedule).map_err(|_| std::fmt::Error)?,
                        scalar(duration),
                        scalar(time_zone)
                    )?;
                }
            }
            if !rollout.approval_steps.is_empty() {
                let steps: Vec<String> =
                    rollout.approval_steps.iter().map(u32::to_string).collect();
                writeln!(out, "    approval:")?;
                writeln!(out, "      steps: [{}]", steps.join(", "))?;
            }
        }
        if let Some(timeout) = &self.drain_timeout {
            writeln!(out, "  handoff:")?;
            writeln!(out, "    drainTimeout: {}", scalar(timeout))?;
        }
        f.write_str(&out)
    }
}

impl Operator {
    /// Operator `id`, its lock in `namespace`, with the default protocol.
    pub fn new(id: &str, namespace: &str) -> Operator {
        Operator {
            id: id.into(),
            namespace: namespace.into(),
            protocol: None,
            handles_unowned: false,
        }
    }

    /// `protocol: Upstream`: an unmodified upstream Camel K operator.
    pub fn upstream(mut self) -> Operator {
        self.protocol = Some("Upstream".into());
        self
    }

    /// `handlesUnowned: true`: it also reconciles what has no owner key.
    pub fn handles_unowned(mut self) -> Operator {
        self.handles_unowned = true;
        self
    }
}

impl Rule {
    /// A rule sending what it matches to `operator`; it matches everything
    /// until [`kinds`](Self::kinds), [`namespaces`](Self::namespaces) or
    /// [`names`](Self::names) narrow it.
    pub fn to(operator: &str) -> Rule {
        Rule {
            name: None,
            kinds: Vec::new(),
            namespaces: Vec::new(),
            names: Vec::new(),
            operator: operator.into(),
        }
    }

    /// The rule's `name`.
    pub fn named(mut self, name: &str) -> Rule {
        self.name = Some(name.into());
        self
    }

    /// `match.kinds`.
    pub fn kinds(mut self, kinds: &[CamelKind]) -> Rule {
        self.kinds = kinds.to_vec();
        self
    }

    /// `match.namespaces`.
    pub fn namespaces(mut self, namespaces: &[&str]) -> Rule {
        self.namespaces = strings(namespaces);
        self
    }

    /// `match.names` (globs).
    pub fn names(mut self, names: &[&str]) -> Rule {
        self.names = strings(names);
        self
    }
}

impl Rollout {
    /// A `rollout` section with nothing set: every field keeps its default.
    pub fn new() -> Rollout {
        Rollout::default()
    }

    /// `steps`: the batches of every move (percentages or counts).
    pub fn steps(mut self, steps: &[&str]) -> Rollout {
        self.steps = strings(steps);
        self
    }

    /// `healthGate.requireReady`.
    pub fn require_ready(mut self, required: bool) -> Rollout {
        self.require_ready = Some(required);
        self
    }

    /// `healthGate.timeout` (a duration).
    pub fn gate_timeout(mut self, timeout: &str) -> Rollout {
        self.gate_timeout = Some(timeout.into());
        self
    }

    /// `healthGate.onFailure` (`Pause` or `Rollback`).
    pub fn on_failure(mut self, what: &str) -> Rollout {
        self.on_failure = Some(what.into());
        self
    }

    /// `pause` between two steps (a duration).
    pub fn pause(mut self, pause: &str) -> Rollout {
        self.pause = Some(pause.into());
        self
    }

    /// `healthGate.soak` (a duration).
    pub fn soak(mut self, soak: &str) -> Rollout {
        self.soak = Some(soak.into());
        self
    }

    /// Appends a freeze window to `windows`: `kind` (`Deny`, `Allow`), a
    /// 5-field cron `schedule`, a `duration`, an IANA `time_zone`.
    pub fn window(
        mut self,
        kind: &str,
        schedule: &str,
        duration: &str,
        time_zone: &str,
    ) -> Rollout {
        self.windows
            .push([kind, schedule, duration, time_zone].map(String::from));
        self
    }

    /// `healthGate.analysis`: PromQL `queries` (name, query, success
    /// condition) against `prometheus`, `count` measurements `interval`
    /// apart, `failure_limit` failures allowed.
    pub fn analysis(
        mut self,
        prometheus: &str,
        interval: &str,
        count: u32,
        failure_limit: u32,
        queries: &[(&str, &str, &str)],
    ) -> Rollout {
        let quoted = |s: &str| serde_json::to_string(s).expect("a string serializes");
        let queries: Vec<String> = queries
            .iter()
            .map(|(name, query, condition)| {
                format!(
                    "{{name: {}, query: {}, successCondition: {}}}",
                    quoted(name),
                    quoted(query),
                    quoted(condition)
                )
            })
            .collect();
        self.analysis = Some(format!(
            "{{prometheus: {}, interval: {interval}, count: {count}, failureLimit: {failure_limit}, queries: [{}]}}",
            quoted(prometheus),
            queries.join(", ")
        ));
        self
    }

    /// `approval.steps`: the steps that start only once approved.
    pub fn approval_steps(mut self, steps: &[u32]) -> Rollout {
        self.approval_steps = steps.to_vec();
        self
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn kind_names(kinds: &[CamelKind]) -> Vec<String> {
    kinds.iter().map(|k| k.kind().to_string()).collect()
}

/// `[a, "b*"]`: a flow sequence of scalars.
fn flow(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| scalar(s)).collect();
    format!("[{}]", items.join(", "))
}

/// `s` as a YAML scalar: plain when it is a name, a duration or a version
/// (letters, digits, `.`, `-`, `_`, `/`, not starting with a digit-only
/// look or an indicator), else double-quoted (JSON's quoting is YAML's).
fn scalar(s: &str) -> String {
    let plain = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        && !s.chars().all(|c| c.is_ascii_digit() || c == '.')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).expect("a string serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use camelk_reconciler::manifest::Manifest;

    fn parses(text: &str) -> camelk_reconciler::api::OperatorAssignment {
        Manifest::parse("operator-assignment.yaml", text.to_string())
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
            .assignment
    }

    /// What the sync tests pushed as text before this builder, byte for byte.
    #[test]
    fn renders_the_text_the_sync_tests_wrote_by_hand() {
        let text = Assignment::new("fleet")
            .operator("operator-1", "ns-a")
            .operator("operator-2", "ns-a")
            .scope(&["ns-a"], &[CamelKind::Integration])
            .default_operator("operator-1")
            .staged_move("operator-1", "operator-2", &["20%", "60%", "100%"])
            .rollout(Rollout::new().gate_timeout("90s").pause("0s"))
            .drain_timeout("2m")
            .render();
        assert_eq!(
            text,
            "apiVersion: camelk.dev/v1alpha1
kind: OperatorAssignment
metadata:
  name: fleet
spec:
  operators:
    - id: operator-1
      namespace: ns-a
    - id: operator-2
      namespace: ns-a
  scope:
    namespaces: [ns-a]
    kinds: [Integration]
  defaultOperator: operator-1
  stagedMoves:
    - from: operator-1
      to: operator-2
      steps: [\"20%\", \"60%\", \"100%\"]
  rollout:
    healthGate:
      timeout: 90s
    pause: 0s
  handoff:
    drainTimeout: 2m
"
        );
        let parsed = parses(&text);
        assert_eq!(parsed.spec.staged_moves.len(), 1);
        assert_eq!(parsed.spec.rollout.health_gate.timeout, "90s");
    }

    /// Every part the builder writes is read back by the library as meant.
    #[test]
    fn every_part_is_read_back_by_the_manifest_parser() {
        let text = Assignment::new("live")
            .upstream_operator("operator-1", "camel-k-op1")
            .with_operator(
                Operator::new("operator-2", "apps")
                    .upstream()
                    .handles_unowned(),
            )
            .operator("operator-3", "apps")
            .scope(
                &["apps", "shop"],
                &[CamelKind::Integration, CamelKind::Pipe],
            )
            .default_operator("operator-1")
            .drift_policy("report")
            .rule(Rule::to("operator-2").names(&["canary-*"]))
            .rule(
                Rule::to("operator-3")
                    .named("streams")
                    .kinds(&[CamelKind::Pipe])
                    .namespaces(&["shop"])
                    .names(&["stream"]),
            )
            .pin(CamelKind::Integration, "shop", "orders", "operator-3")
            .staged_move("operator-1", "operator-2", &["50%", "100%"])
            .rollout(
                Rollout::new()
                    .steps(&["3", "100%"])
                    .require_ready(true)
                    .gate_timeout("3m")
                    .on_failure("Rollback")
                    .pause("4s"),
            )
            .drain_timeout("1m")
            .render();
        let a = parses(&text);
        assert_eq!(a.metadata.name.as_deref(), Some("live"));
        let spec = &a.spec;
        assert_eq!(spec.operators.len(), 3);
        assert!(spec.operators[1].handles_unowned);
        assert_eq!(
            serde_json::to_value(spec.operators[0].protocol).unwrap(),
            "Upstream"
        );
        assert_eq!(spec.default_operator.as_str(), "operator-1");
        assert_eq!(serde_json::to_value(spec.drift_policy).unwrap(), "report");
        assert_eq!(spec.rules.len(), 2);
        assert_eq!(spec.rules[1].name.as_deref(), Some("streams"));
        assert_eq!(spec.pins.len(), 1);
        assert_eq!(spec.pins[0].name, "orders");
        assert_eq!(spec.staged_moves[0].steps.len(), 2);
        assert_eq!(spec.rollout.steps.len(), 2);
        assert_eq!(spec.rollout.pause, "4s");
        assert_eq!(spec.rollout.health_gate.timeout, "3m");
        assert_eq!(
            serde_json::to_value(spec.rollout.health_gate.on_failure).unwrap(),
            "Rollback"
        );
        assert_eq!(
            serde_json::to_value(&spec.handoff).unwrap()["drainTimeout"],
            "1m"
        );
        let scope = serde_json::to_value(&spec.scope).unwrap();
        assert_eq!(scope["namespaces"], serde_json::json!(["apps", "shop"]));
        assert_eq!(scope["kinds"], serde_json::json!(["Integration", "Pipe"]));
    }

    #[test]
    fn scalars_that_yaml_would_read_otherwise_are_quoted() {
        assert_eq!(scalar("operator-1"), "operator-1");
        assert_eq!(scalar("90s"), "90s");
        assert_eq!(scalar("50%"), "\"50%\"");
        assert_eq!(scalar("canary-*"), "\"canary-*\"");
        assert_eq!(scalar("3"), "\"3\"");
        assert_eq!(scalar("on"), "\"on\"");
        assert_eq!(scalar(""), "\"\"");
    }
}
