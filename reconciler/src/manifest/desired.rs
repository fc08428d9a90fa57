//! The desired model: the precedence of an `OperatorAssignment`, compiled
//! once (name globs and label selectors included) and applied to many
//! resources. The plan engine, the manifest editor and the reconciler ask it
//! who should own a resource.
//!
//! Contract, for a resource in scope: its pin, else the first rule that
//! matches it, else `defaultOperator`; then the first staged move whose `from`
//! is that owner (and whose selector matches) sends it to the move's `to`,
//! unless the owner came from a pin. A resource outside the scope has no
//! desired owner. Pure and deterministic.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::api::{LabelMatcher, NameGlob, OperatorAssignmentSpec, OperatorId};
use crate::camel_k::CamelKind;
use crate::inventory::Resource;

/// Which part of the manifest decided an owner.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum Reason {
    /// A pin names the resource.
    Pin {
        /// Position of the pin in `spec.pins`, from 0.
        index: usize,
    },
    /// A rule matches the resource (the first that matches wins).
    Rule {
        /// Position of the rule in `spec.rules`, from 0.
        index: usize,
        /// The rule's name, if it has one.
        name: Option<String>,
    },
    /// No pin or rule matches: `spec.defaultOperator` owns it.
    Default,
    /// A staged move (`spec.stagedMoves`) takes the resource from the operator
    /// pins, rules or the default give it.
    StagedMove {
        /// Position of the staged move in `spec.stagedMoves`, from 0.
        index: usize,
    },
    /// An Integration created by a Pipe (or KameletBinding) goes where its
    /// Pipe goes, whatever the manifest says of the Integration itself.
    Follows {
        /// The kind of the resource it follows (`Pipe` or `KameletBinding`).
        kind: CamelKind,
        /// The name of that resource, in the same namespace.
        name: String,
    },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Pin { index } => write!(f, "pin #{}", index + 1),
            Reason::Rule {
                index,
                name: Some(name),
            } => write!(f, "rule #{} ({name})", index + 1),
            Reason::Rule { index, name: None } => write!(f, "rule #{}", index + 1),
            Reason::Default => f.write_str("default"),
            Reason::StagedMove { index } => write!(f, "staged move #{}", index + 1),
            Reason::Follows { kind, name } => write!(f, "follows its {kind} {name}"),
        }
    }
}

/// The owner a manifest wants for a resource, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The operator that should own the resource.
    pub operator: OperatorId,
    /// Which part of the manifest decided it.
    pub because: Reason,
}

/// A manifest's precedence, ready to apply.
pub struct Desired<'a> {
    spec: &'a OperatorAssignmentSpec,
    pins: HashMap<(CamelKind, &'a str, &'a str), usize>,
    scope_namespaces: Option<Vec<&'a str>>,
    /// Per rule, in order: its name globs and its label selector, compiled.
    rules: Vec<(Vec<NameGlob>, Option<LabelMatcher>)>,
    /// Per staged move, in order: its label selector, compiled.
    staged_selectors: Vec<Option<LabelMatcher>>,
}

impl<'a> Desired<'a> {
    /// Compiles the spec's selectors and globs once, for many decisions.
    pub fn new(spec: &'a OperatorAssignmentSpec) -> Desired<'a> {
        let mut pins = HashMap::new();
        for (i, pin) in spec.pins.iter().enumerate() {
            // Validation rejects duplicates; should one slip through, the first wins.
            pins.entry((pin.kind, pin.namespace.as_str(), pin.name.as_str()))
                .or_insert(i);
        }
        let scope_namespaces = (!spec.scope.namespaces.is_empty())
            .then(|| spec.scope.namespaces.iter().map(String::as_str).collect());
        let rules = spec
            .rules
            .iter()
            .map(|rule| {
                let names = rule.matches.names.iter().map(|g| NameGlob::new(g));
                let selector = rule.matches.selector.as_ref().map(LabelMatcher::new);
                (names.collect(), selector)
            })
            .collect();
        let staged_selectors = spec
            .staged_moves
            .iter()
            .map(|m| m.selector.as_ref().map(LabelMatcher::new))
            .collect();
        Desired {
            spec,
            pins,
            scope_namespaces,
            rules,
            staged_selectors,
        }
    }

    /// Whether the spec's scope includes `kind` in `namespace`.
    pub fn in_scope(&self, kind: CamelKind, namespace: &str) -> bool {
        self.spec.scope.covers_kind(kind)
            && self
                .scope_namespaces
                .as_ref()
                .is_none_or(|list| list.contains(&namespace))
    }

    /// The desired owner of `resource`, or `None` when it is out of scope.
    pub fn decide(&self, resource: &Resource) -> Option<Decision> {
        let id = &resource.id;
        if !self.in_scope(id.kind, &id.namespace) {
            return None;
        }
        if let Some(&index) = self
            .pins
            .get(&(id.kind, id.namespace.as_str(), id.name.as_str()))
        {
            return Some(Decision {
                operator: self.spec.pins[index].operator.clone(),
                because: Reason::Pin { index },
            });
        }
        let base = self
            .spec
            .rules
            .iter()
            .zip(&self.rules)
            .enumerate()
            .find(|(_, (rule, (names, selector)))| {
                let m = &rule.matches;
                (m.kinds.is_empty() || m.kinds.contains(&id.kind))
                    && (m.namespaces.is_empty() || m.namespaces.iter().any(|n| n == &id.namespace))
                    && (names.is_empty() || names.iter().any(|g| g.is_match(&id.name)))
                    && selector
                        .as_ref()
                        .is_none_or(|s| s.matches(&resource.labels))
            })
            .map(|(index, (rule, _))| (index, rule))
            .map(|(index, rule)| Decision {
                operator: rule.operator.clone(),
                because: Reason::Rule {
                    index,
                    name: rule.name.clone(),
                },
            })
            .unwrap_or_else(|| Decision {
                operator: self.spec.default_operator.clone(),
                because: Reason::Default,
            });
        let staged = self
            .spec
            .staged_moves
            .iter()
            .zip(&self.staged_selectors)
            .enumerate()
            .find(|(_, (m, selector))| {
                m.from == base.operator
                    && selector
                        .as_ref()
                        .is_none_or(|s| s.matches(&resource.labels))
            });
        Some(match staged {
            Some((index, (m, _))) => Decision {
                operator: m.to.clone(),
                because: Reason::StagedMove { index },
            },
            None => base,
        })
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::inventory::ResourceRef;

    fn spec() -> OperatorAssignmentSpec {
        serde_json::from_value(serde_json::json!({
            "operators": [
                {"id": "op-1", "namespace": "ns-1"},
                {"id": "op-2", "namespace": "ns-2"},
                {"id": "op-3", "namespace": "ns-3"},
            ],
            "defaultOperator": "op-1",
            "rules": [
                {"name": "eu", "match": {"names": ["orders-??", "*-eu-*"]}, "operator": "op-2"},
                {"match": {"selector": {
                    "matchLabels": {"tier": "gold"},
                    "matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["us"]}],
                }}, "operator": "op-3"},
            ],
            "stagedMoves": [
                {"from": "op-3", "to": "op-1", "selector": {
                    "matchExpressions": [{"key": "canary", "operator": "Exists"}],
                }},
            ],
        }))
        .unwrap()
    }

    fn resource(name: &str, labels: &[(&str, &str)]) -> Resource {
        Resource {
            id: ResourceRef {
                kind: CamelKind::Integration,
                namespace: "shop".into(),
                name: name.into(),
            },
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            owner_annotation: None,
            phase: None,
            in_flight: None,
            created_by: None,
            key_managers: Default::default(),
        }
    }

    #[test]
    fn compiled_globs_and_selectors_decide_as_the_manifest_says() {
        let spec = spec();
        let desired = Desired::new(&spec);
        let decide = |name: &str, labels: &[(&str, &str)]| {
            let d = desired.decide(&resource(name, labels)).unwrap();
            (d.operator.to_string(), d.because)
        };
        let eu = Reason::Rule {
            index: 0,
            name: Some("eu".into()),
        };
        assert_eq!(decide("orders-de", &[]), ("op-2".into(), eu.clone()));
        assert_eq!(decide("shop-eu-1", &[]), ("op-2".into(), eu));
        assert_eq!(decide("orders-d", &[]).1, Reason::Default);
        let gold = Reason::Rule {
            index: 1,
            name: None,
        };
        assert_eq!(decide("a", &[("tier", "gold")]), ("op-3".into(), gold));
        assert_eq!(
            decide("a", &[("tier", "gold"), ("region", "us")]).1,
            Reason::Default
        );
        // The staged move's own selector picks among op-3's resources.
        assert_eq!(
            decide("a", &[("tier", "gold"), ("canary", "")]),
            ("op-1".into(), Reason::StagedMove { index: 0 })
        );
    }
}
