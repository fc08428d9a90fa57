//! The commented starter manifest `kubectl camelk init` writes.
//!
//! Contract: [`starter`] always yields a manifest that [`super::Manifest::parse`]
//! accepts without warnings (a unit test holds it to that).

/// A starter `OperatorAssignment` with every section explained.
pub fn starter(name: &str, operators: &[(String, String)], default_operator: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\
# OperatorAssignment: which Apache Camel K operator owns which Camel K resource.
# Edit it with `kubectl camelk assign`, `unassign` and `rollout` (they keep
# this file's comments and layout), check it with `kubectl camelk validate`,
# and review what a change does with `kubectl camelk plan`.
apiVersion: camelk.dev/v1alpha1
kind: OperatorAssignment
metadata:
  name: {name}
spec:
  # Every operator a resource may be assigned to. `protocol: Upstream` for a
  # real Apache Camel K operator (the reconciler releases resources on its
  # behalf); `Handoff` only for the test double `reconciler operator`.
  operators:
"
    ));
    for (id, namespace) in operators {
        out.push_str(&format!(
            "    - id: {id}\n      namespace: {namespace}\n      protocol: Upstream\n"
        ));
    }
    // No `\` continuation here: it would eat the comment's indentation.
    out.push_str(&format!(
        "  # Which resources this assignment governs. Empty lists mean every
  # namespace and every Camel K kind.
  scope:
    namespaces: []
    kinds: []
  # Owner of every resource in scope that no pin or rule assigns.
  defaultOperator: {default_operator}
  # Ordered rules: the first rule that matches a resource decides its owner.
  # A rule matches by kinds, namespaces, name globs and a label selector.
  #   - name: canary
  #     match:
  #       kinds: [Integration]
  #       namespaces: [shop]
  #       names: [\"orders-*\"]
  #       selector:
  #         matchLabels:
  #           tier: gold
  #     operator: operator-2
  rules: []
  # Single resources assigned explicitly; a pin beats every rule.
  # `kubectl camelk assign integration/orders --to operator-2 -n shop`
  pins: []
  # Staged moves of one operator's resources to another, written by
  # `kubectl camelk rollout --from A --to B --steps 10%,50%,100%`.
  stagedMoves: []
  rollout:
    # Cumulative targets per step, counts (5) or percentages (\"10%\").
    steps: [\"100%\"]
    healthGate:
      # Moved Integrations must be Ready before the next step starts.
      requireReady: true
      timeout: 10m
    # Wait between steps.
    pause: 0s
  handoff:
    # How long the current owner may take to release a resource.
    drainTimeout: 5m
    # Never | AfterTimeout: whether a stalled release may be forced.
    force: Never
"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;

    #[test]
    fn starter_is_valid_without_warnings() {
        let text = starter(
            "camel-k",
            &[
                ("operator-1".into(), "camel-k".into()),
                ("operator-2".into(), "camel-k".into()),
            ],
            "operator-1",
        );
        let manifest = Manifest::parse("assignment.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        assert!(manifest.warnings.is_empty(), "{:?}", manifest.warnings);
        assert_eq!(manifest.assignment.spec.operators.len(), 2);
    }
}
