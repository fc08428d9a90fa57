//! Desired owners: the precedence of an `OperatorAssignment`, compiled once
//! and applied to many resources.
//!
//! Contract, for a resource in scope: its pin, else the first rule that
//! matches it, else `defaultOperator`; then the first staged move whose `from`
//! is that owner (and whose selector matches) sends it to the move's `to`,
//! unless the owner came from a pin. A resource outside the scope has no
//! desired owner. Pure and deterministic.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Serialize;

use crate::api::{OperatorAssignmentSpec, OperatorId};
use crate::camel_k::CamelKind;
use crate::inventory::Resource;

/// Which part of the manifest decided an owner.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum Reason {
    Pin {
        index: usize,
    },
    Rule {
        index: usize,
        name: Option<String>,
    },
    Default,
    StagedMove {
        index: usize,
    },
    /// An Integration created by a Pipe (or KameletBinding) goes where its
    /// Pipe goes, whatever the manifest says of the Integration itself.
    Follows {
        kind: CamelKind,
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
    pub operator: OperatorId,
    pub because: Reason,
}

/// A manifest's precedence, ready to apply.
pub struct Desired<'a> {
    spec: &'a OperatorAssignmentSpec,
    pins: HashMap<(CamelKind, &'a str, &'a str), usize>,
    scope_namespaces: Option<Vec<&'a str>>,
}

impl<'a> Desired<'a> {
    pub fn new(spec: &'a OperatorAssignmentSpec) -> Desired<'a> {
        let mut pins = HashMap::new();
        for (i, pin) in spec.pins.iter().enumerate() {
            // Validation rejects duplicates; should one slip through, the first wins.
            pins.entry((pin.kind, pin.namespace.as_str(), pin.name.as_str()))
                .or_insert(i);
        }
        let scope_namespaces = (!spec.scope.namespaces.is_empty())
            .then(|| spec.scope.namespaces.iter().map(String::as_str).collect());
        Desired {
            spec,
            pins,
            scope_namespaces,
        }
    }

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
            .enumerate()
            .find(|(_, rule)| {
                let m = &rule.matches;
                (m.kinds.is_empty() || m.kinds.contains(&id.kind))
                    && (m.namespaces.is_empty() || m.namespaces.iter().any(|n| n == &id.namespace))
                    && (m.names.is_empty() || m.names.iter().any(|g| glob_matches(g, &id.name)))
                    && m.selector
                        .as_ref()
                        .is_none_or(|s| selector_matches(s, &resource.labels))
            })
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
        let staged = self.spec.staged_moves.iter().enumerate().find(|(_, m)| {
            m.from == base.operator
                && m.selector
                    .as_ref()
                    .is_none_or(|s| selector_matches(s, &resource.labels))
        });
        Some(match staged {
            Some((index, m)) => Decision {
                operator: m.to.clone(),
                because: Reason::StagedMove { index },
            },
            None => base,
        })
    }
}

/// Shell-style glob on a resource name: `*` any run, `?` one character.
pub fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n) = (glob.as_bytes(), name.as_bytes());
    let (mut gi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some(b'*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == b'?' || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

/// Kubernetes label-selector semantics (an empty selector matches everything;
/// `NotIn` and `DoesNotExist` match when the key is absent).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let exact = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    exact
        && selector.match_expressions.iter().flatten().all(|e| {
            let value = labels.get(&e.key);
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("orders-*", "orders-eu"));
        assert!(!glob_matches("orders-*", "order"));
        assert!(glob_matches("a?c", "abc"));
        assert!(glob_matches("*-eu-*", "shop-eu-1"));
        assert!(!glob_matches("*-eu", "shop-eu-1"));
        assert!(glob_matches("", ""));
        assert!(!glob_matches("", "x"));
    }
}
