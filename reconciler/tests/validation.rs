//! Validation beyond the malformed corpus of the plugin: warnings (which do
//! not reject a manifest) and the checks that need several fields at once.

use camelk_reconciler::manifest::{Manifest, Severity};

fn check(body: &str) -> Result<Manifest, Vec<String>> {
    let text = format!(
        "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: t\nspec:\n  operators:\n    - id: op-1\n      namespace: a\n    - id: op-2\n      namespace: a\n{body}"
    );
    Manifest::parse("t.yaml", text)
        .map_err(|e| e.diagnostics().iter().map(ToString::to_string).collect())
}

fn warnings(body: &str) -> Vec<String> {
    let manifest = check(body).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        manifest
            .warnings
            .iter()
            .all(|w| w.severity == Severity::Warning)
    );
    manifest.warnings.iter().map(ToString::to_string).collect()
}

#[test]
fn rules_that_can_never_match_are_warnings() {
    assert_eq!(
        warnings(
            "  scope:\n    kinds: [Pipe]\n  defaultOperator: op-1\n  rules:\n    - match: {kinds: [Integration]}\n      operator: op-2\n"
        ),
        vec![
            "t.yaml:15:7: warning: this rule can never match: none of its kinds is in spec.scope.kinds"
        ]
    );
    assert_eq!(
        warnings(
            "  scope:\n    namespaces: [shop]\n  defaultOperator: op-1\n  rules:\n    - match: {namespaces: [billing]}\n      operator: op-2\n"
        ),
        vec![
            "t.yaml:15:7: warning: this rule can never match: none of its namespaces is in spec.scope.namespaces"
        ]
    );
    assert_eq!(
        warnings(
            "  defaultOperator: op-1\n  rules:\n    - match: {kinds: [Integration]}\n      operator: op-2\n    - match: {kinds: [Integration], names: [\"a*\"]}\n      operator: op-1\n"
        ),
        vec![
            "t.yaml:15:7: warning: this rule can never match: spec.rules[0] matches every resource it matches, and comes first"
        ]
    );
    // A later rule with a narrower glob is reachable when the earlier one is narrower still.
    assert!(
        warnings("  defaultOperator: op-1\n  rules:\n    - match: {names: [\"ab*\"]}\n      operator: op-2\n    - match: {names: [\"a*\"]}\n      operator: op-1\n")
            .is_empty()
    );
}

#[test]
fn settings_without_effect_are_warnings() {
    assert_eq!(
        warnings("  defaultOperator: op-1\n  handoff:\n    force: Never\n    forceAfter: 10m\n"),
        vec!["t.yaml:14:17: warning: `forceAfter` has no effect while `force` is `Never`"]
    );
}

#[test]
fn every_error_is_reported_not_only_the_first() {
    let errors = check(
        "  defaultOperator: op-9\n  pins:\n    - {kind: Integration, namespace: shop, name: a, operator: op-8}\n  rollout:\n    steps: [\"0%\", \"120%\"]\n    pause: soon\n",
    )
    .unwrap_err();
    assert_eq!(
        errors,
        vec![
            "t.yaml:11:20: error: unknown operator `op-9`; did you mean `op-1`?; declared operators: op-1, op-2",
            "t.yaml:13:63: error: unknown operator `op-8`; did you mean `op-1`?; declared operators: op-1, op-2",
            "t.yaml:15:13: error: empty rollout step `0%`: a step must move at least one resource",
            "t.yaml:15:19: error: rollout step `120%` is over 100%",
            "t.yaml:16:12: error: `soon` is not a duration; write for example `30s`, `5m` or `1h30m`",
        ]
    );
}

#[test]
fn approval_steps_count_from_one_and_a_soak_is_a_duration() {
    let errors = check(
        "  defaultOperator: op-1\n  rollout:\n    healthGate: {soak: awhile}\n    approval:\n      steps: [0, 2]\n",
    )
    .unwrap_err();
    assert_eq!(
        errors,
        vec![
            "t.yaml:13:24: error: `awhile` is not a duration; write for example `30s`, `5m` or `1h30m`",
            "t.yaml:15:15: error: steps are numbered from 1: approval of step `0` names no step",
        ]
    );
}

#[test]
fn freeze_windows_are_checked_field_by_field() {
    let errors = check(
        "  defaultOperator: op-1\n  rollout:\n    windows:\n    - {kind: Deny, schedule: \"0 22 * *\", duration: 2h}\n    - {kind: Allow, schedule: \"0 9 * * 1-5\", duration: 8h, timeZone: Mars/Olympus}\n    - {kind: Deny, schedule: \"0 22 * * *\", duration: 0s}\n",
    )
    .unwrap_err();
    assert_eq!(
        errors,
        vec![
            "t.yaml:14:30: error: schedule `0 22 * *` must have 5 fields: minute hour day-of-month month day-of-week",
            "t.yaml:15:70: error: unknown time zone `Mars/Olympus`",
            "t.yaml:16:54: error: window `0 22 * * *` must have a duration greater than zero",
        ]
    );
}

#[test]
fn a_metric_analysis_is_checked_field_by_field() {
    let errors = check(
        "  defaultOperator: op-1\n  rollout:\n    healthGate:\n      analysis:\n        prometheus: prometheus:9090\n        count: 0\n        queries:\n        - {name: errors, query: \"sum(x)\", successCondition: \"errors < 1\"}\n        - {name: errors, query: \"sum(y)\", successCondition: \"result <= 0.5\"}\n",
    )
    .unwrap_err();
    assert_eq!(
        errors,
        vec![
            "t.yaml:15:21: error: `prometheus:9090` is not an http:// or https:// URL of Prometheus",
            "t.yaml:16:16: error: an analysis takes at least one measurement",
            "t.yaml:18:61: error: success condition `errors < 1` is not `result <op> <number>` (op one of <, <=, >, >=, ==, !=), as in `result < 0.05`",
            "t.yaml:19:18: error: query `errors` is named twice",
        ]
    );
}

#[test]
fn notifications_are_checked_field_by_field() {
    let errors = check(
        "  defaultOperator: op-1\n  notifications:\n  - {name: a, webhook: {url: \"ftp://x\"}}\n  - {name: a, slack: {}}\n  - {name: b}\n  - {name: c, gitHubStatus: {api: github.com, repository: o/r, tokenSecretRef: {name: gh, key: token}}}\n",
    )
    .unwrap_err();
    assert_eq!(
        errors,
        vec![
            "t.yaml:13:30: error: `ftp://x` is not an http:// or https:// URL",
            "t.yaml:14:12: error: notification `a` is named twice",
            "t.yaml:14:22: error: name one of url, urlSecretRef",
            "t.yaml:15:12: error: notification `b` names one of webhook, slack, gitHubStatus, gitLabStatus",
            "t.yaml:16:35: error: `github.com` is not an http:// or https:// URL",
        ]
    );
}

#[test]
fn the_crd_and_the_checks_agree_on_field_names() {
    // Every field the types know is accepted (nothing is reported unknown).
    let manifest = check(
        "  scope: {namespaces: [shop], kinds: [Integration]}\n  defaultOperator: op-1\n  rules:\n    - name: r\n      match:\n        kinds: [Integration]\n        namespaces: [shop]\n        names: [\"*\"]\n        selector: {matchLabels: {a: b}, matchExpressions: [{key: c, operator: Exists}]}\n      operator: op-2\n  pins:\n    - {kind: Integration, namespace: shop, name: x, operator: op-1}\n  stagedMoves:\n    - {from: op-1, to: op-2, selector: {matchLabels: {w: \"1\"}}, steps: [1, \"100%\"]}\n  rollout:\n    steps: [\"10%\"]\n    healthGate: {requireReady: false, timeout: 1m, soak: 2m, analysis: {prometheus: \"http://p:9090\", interval: 10s, count: 3, failureLimit: 1, consecutiveErrorLimit: 2, queries: [{name: e, query: \"sum(x)\", successCondition: \"result < 1\"}]}}\n    pause: 30s\n    approval: {steps: [2]}\n    windows: [{kind: Deny, schedule: \"0 22 * * *\", duration: 8h, timeZone: Europe/Berlin}]\n  handoff: {drainTimeout: 1m, force: AfterTimeout, forceAfter: 5m}\n  notifications:\n  - {name: w, webhook: {url: \"https://h/x\"}}\n  - {name: s, slack: {urlSecretRef: {name: slack, key: url}}}\n  - {name: g, gitLabStatus: {api: \"https://gitlab.example.com/api/v4\", repository: \"42\", tokenSecretRef: {name: gl, key: token}}}\n",
    );
    assert!(manifest.is_ok(), "{manifest:?}");
}

/// The typed value read from the positioned tree equals what `serde-saphyr`
/// reads from the text, and the tree reader never accepts what
/// `serde-saphyr` rejects (it leaves every doubt, and every error, to it).
#[test]
fn the_tree_reader_agrees_with_serde_saphyr() {
    use camelk_reconciler::api::OperatorAssignment;
    use camelk_reconciler::manifest::{Tree, from_tree};

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![
        root.join("reconciler/tests/fixtures/commented.yaml"),
        root.join("examples/operator-assignment.yaml"),
    ];
    for dir in ["kubectl-camelk/tests/malformed", "examples/demo"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            files.extend(
                entries
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|x| x == "yaml")),
            );
        }
    }
    let mut read_from_tree = 0;
    for file in &files {
        // Files that are not UTF-8 (in the corpus on purpose) reach neither reader.
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let Ok(tree) = Tree::parse(&text) else {
            continue;
        };
        let reference = serde_saphyr::from_str::<OperatorAssignment>(&text);
        let ours = from_tree::<OperatorAssignment>(&tree.root);
        match (ours, reference) {
            (Ok(ours), Ok(reference)) => {
                read_from_tree += 1;
                assert_eq!(ours.spec, reference.spec, "{}", file.display());
                assert_eq!(ours.metadata, reference.metadata, "{}", file.display());
            }
            (Ok(_), Err(e)) => panic!(
                "{}: accepted what serde-saphyr rejects: {e}",
                file.display()
            ),
            (Err(_), _) => {}
        }
    }
    assert!(read_from_tree >= 10, "{read_from_tree} of {}", files.len());
}
