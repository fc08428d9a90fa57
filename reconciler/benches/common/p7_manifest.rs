//! The manifest of the P7 case (`assign` on a manifest with 10,000 pins):
//! four operators, `rules` rules of four shapes, a rollout, and `pins` pins
//! each with a trailing comment. Both `kubectl-camelk`'s `plan_and_assign`
//! bench and `reconciler`'s `yaml_engines` bench include this file with
//! `#[path]`, so the two measure the same bytes.

#![allow(dead_code)]

/// How many namespaces the pins and inventories spread over.
pub const NAMESPACES: usize = 200;

/// The manifest with `pins` pins and `rules` rules; deterministic.
pub fn manifest(pins: usize, rules: usize) -> String {
    let mut text = String::from(
        "# Generated for the benchmark.\napiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: bench\nspec:\n  operators:\n",
    );
    for i in 1..=4 {
        text.push_str(&format!(
            "    - id: operator-{i}   # fleet {i}\n      namespace: camel-k-{i}\n"
        ));
    }
    text.push_str("  defaultOperator: operator-1\n  rules:\n");
    for r in 0..rules {
        // Mostly narrow rules, so a resource is tried against many of them.
        let operator = 2 + r % 3;
        match r % 4 {
            0 => text.push_str(&format!(
                "    - name: names-{r}\n      match:\n        names: [\"app-{r}-*\", \"svc-?{r}\"]\n      operator: operator-{operator}\n"
            )),
            1 => text.push_str(&format!(
                "    - name: ns-{r}\n      match:\n        kinds: [Pipe]\n        namespaces: [ns-{}]\n      operator: operator-{operator}\n",
                r * 3
            )),
            2 => text.push_str(&format!(
                "    - name: selector-{r}\n      match:\n        selector:\n          matchLabels:\n            team: team-{r}\n      operator: operator-{operator}\n"
            )),
            _ => text.push_str(&format!(
                "    - name: expr-{r}\n      match:\n        kinds: [Integration]\n        selector:\n          matchExpressions:\n            - {{key: tier, operator: In, values: [tier-{r}]}}\n      operator: operator-{operator}\n"
            )),
        }
    }
    text.push_str("  rollout:\n    steps: [\"10%\", \"50%\", \"100%\"]\n  pins:\n");
    for p in 0..pins {
        text.push_str(&format!(
            "    - kind: Integration\n      namespace: ns-{}\n      name: pinned-{p}\n      operator: operator-{}   # pin {p}\n",
            p % NAMESPACES,
            1 + p % 4
        ));
    }
    text
}
