//! The plan engine on small, readable scenarios: each test states one rule of
//! the engine's contract (see `camelk_reconciler::plan`).

use camelk_reconciler::api::Labels;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::inventory::{Inventory, Resource, ResourceRef};
use camelk_reconciler::manifest::Manifest;
use camelk_reconciler::plan::{self, Actual, BlockReason, Reason};

fn spec(body: &str) -> camelk_reconciler::api::OperatorAssignmentSpec {
    let text = format!(
        "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: t\nspec:\n  operators:\n    - id: op-1\n      namespace: a\n    - id: op-2\n      namespace: a\n{body}"
    );
    Manifest::parse("t.yaml", text)
        .unwrap_or_else(|e| panic!("{e}"))
        .assignment
        .spec
}

fn res(
    kind: CamelKind,
    name: &str,
    owner: Option<&str>,
    phase: Option<&str>,
    labels: &[(&str, &str)],
) -> Resource {
    let mut map: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(o) = owner {
        map.insert(OPERATOR_ID_KEY.into(), o.into());
    }
    Resource {
        id: ResourceRef {
            kind,
            namespace: "shop".into(),
            name: name.into(),
        },
        labels: map,
        owner_annotation: owner.map(str::to_string),
        phase: phase.map(str::to_string),
        in_flight: None,
        created_by: None,
        key_managers: Default::default(),
    }
}

fn names<'a>(items: impl Iterator<Item = &'a ResourceRef>) -> Vec<&'a str> {
    items.map(|r| r.name.as_str()).collect()
}

#[test]
fn a_staged_move_batches_by_its_own_steps() {
    let spec = spec(
        "  defaultOperator: op-1\n  stagedMoves:\n    - from: op-1\n      to: op-2\n      steps: [1, 3]\n  rollout:\n    steps: [\"50%\"]\n",
    );
    let inventory = Inventory {
        keys_guarded: false,
        resources: ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| {
                res(
                    CamelKind::Integration,
                    n,
                    Some("op-1"),
                    Some("Running"),
                    &[],
                )
            })
            .collect(),
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    let sizes: Vec<(usize, usize)> = planned
        .batches
        .iter()
        .map(|b| (b.step, b.moves.len()))
        .collect();
    assert_eq!(sizes, vec![(1, 1), (2, 2), (3, 2)]);
    assert!(
        planned
            .moves()
            .all(|m| m.because == Reason::StagedMove { index: 0 })
    );
    assert_eq!(
        names(planned.moves().map(|m| &m.resource)),
        vec!["a", "b", "c", "d", "e"]
    );
}

#[test]
fn a_staged_move_never_overrides_a_pin_and_honours_its_selector() {
    let spec = spec(
        "  defaultOperator: op-1\n  pins:\n    - {kind: Integration, namespace: shop, name: pinned, operator: op-1}\n  stagedMoves:\n    - from: op-1\n      to: op-2\n      selector:\n        matchLabels: {wave: \"1\"}\n",
    );
    let inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            res(
                CamelKind::Integration,
                "pinned",
                Some("op-1"),
                None,
                &[("wave", "1")],
            ),
            res(
                CamelKind::Integration,
                "wave-1",
                Some("op-1"),
                None,
                &[("wave", "1")],
            ),
            res(
                CamelKind::Integration,
                "wave-2",
                Some("op-1"),
                None,
                &[("wave", "2")],
            ),
        ],
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(names(planned.moves().map(|m| &m.resource)), vec!["wave-1"]);
    assert_eq!(planned.unchanged.total, 2);
}

#[test]
fn work_in_flight_blocks_the_move_and_says_why() {
    let spec = spec("  defaultOperator: op-2\n");
    let inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            res(
                CamelKind::Build,
                "build-1",
                Some("op-1"),
                Some("Running"),
                &[],
            ),
            res(
                CamelKind::Build,
                "build-2",
                Some("op-1"),
                Some("Succeeded"),
                &[],
            ),
            res(
                CamelKind::Integration,
                "it",
                Some("op-1"),
                Some("Deploying"),
                &[],
            ),
            res(CamelKind::Pipe, "pipe", Some("op-1"), None, &[]),
        ],
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(
        names(planned.moves().map(|m| &m.resource)),
        vec!["build-2", "pipe"]
    );
    let blocked: Vec<(&str, &BlockReason)> = planned
        .blocked
        .iter()
        .map(|b| (b.change.resource.name.as_str(), &b.why))
        .collect();
    assert_eq!(blocked.len(), 2);
    assert_eq!(blocked[0].0, "it");
    assert_eq!(blocked[1].0, "build-1");
    assert_eq!(
        blocked[0].1.to_string(),
        "phase `Deploying`: the workload is being rolled out"
    );
}

#[test]
fn owner_keys_decide_between_first_assignment_error_and_move() {
    let spec = spec("  defaultOperator: op-2\n");
    let mut label_only = res(
        CamelKind::Integration,
        "label-only",
        Some("op-1"),
        None,
        &[],
    );
    label_only.owner_annotation = None;
    let mut conflict = res(CamelKind::Integration, "conflict", Some("op-1"), None, &[]);
    conflict.owner_annotation = Some("op-2".into());
    let mut invalid = res(CamelKind::Integration, "invalid", None, None, &[]);
    invalid.owner_annotation = Some("not valid!".into());
    let inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            label_only,
            conflict,
            invalid,
            res(CamelKind::Integration, "nobody", None, None, &[]),
        ],
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(
        names(planned.moves().map(|m| &m.resource)),
        vec!["label-only"]
    );
    assert_eq!(
        names(planned.first_assignments.iter().map(|a| &a.resource)),
        vec!["nobody"]
    );
    assert_eq!(
        names(planned.errors.iter().map(|e| &e.resource)),
        vec!["invalid"]
    );
    // Keys that disagree: the annotation (upstream obeys it) names the
    // owner, op-2, whom the manifest wants; the label is set to match.
    assert_eq!(
        names(planned.conflicts.iter().map(|c| &c.resource)),
        vec!["conflict"]
    );
    assert!(
        planned.conflicts[0]
            .to_string()
            .contains("label says `op-1` but its annotation says `op-2`"),
        "{}",
        planned.conflicts[0]
    );
    assert!(planned.conflicts[0].mended);
    assert_eq!(
        names(planned.adoptions.iter().map(|a| &a.resource)),
        vec!["conflict"]
    );
    assert_eq!(planned.unchanged.total, 1);
}

#[test]
fn owner_keys_another_tool_applies_block_moves_until_the_policy_keeps_them() {
    let spec = spec(
        "  defaultOperator: op-2
",
    );
    let applied = |name: &str, label: Option<&str>, annotation: Option<&str>| {
        let mut r = res(CamelKind::Integration, name, Some("op-1"), None, &[]);
        r.key_managers.label_applier = label.map(str::to_string);
        r.key_managers.annotation_applier = annotation.map(str::to_string);
        r
    };
    // kamel-style manifests in Git: the annotation alone, applied by Flux.
    let mut adopt = applied("adopt", None, Some("kustomize-controller"));
    adopt.labels.remove(OPERATOR_ID_KEY);
    adopt.owner_annotation = Some("op-2".into());
    let mut torn = applied("torn", Some("argocd-controller"), None);
    torn.owner_annotation = Some("op-2".into());
    let mut inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            applied("flux", None, Some("kustomize-controller")),
            adopt,
            torn,
            res(CamelKind::Integration, "free", Some("op-1"), None, &[]),
        ],
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(names(planned.moves().map(|m| &m.resource)), vec!["free"]);
    let blocked: Vec<(&str, String)> = planned
        .blocked
        .iter()
        .map(|b| (b.change.resource.name.as_str(), b.why.to_string()))
        .collect();
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].0, "flux");
    assert!(
        blocked[0].1.starts_with("kustomize-controller applies its")
            && blocked[0].1.contains("kubectl camelk strip-owner-keys"),
        "{blocked:?}"
    );
    // Adding a label the tool does not apply fights no one; setting a
    // label the tool applies would.
    assert_eq!(
        names(planned.adoptions.iter().map(|a| &a.resource)),
        vec!["adopt"]
    );
    assert!(!planned.conflicts[0].mended);
    assert!(
        planned.conflicts[0]
            .to_string()
            .contains("argocd-controller")
    );

    // The policy keeps the keys: everything moves or is set right.
    inventory.keys_guarded = true;
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(
        names(planned.moves().map(|m| &m.resource)),
        vec!["flux", "free"]
    );
    assert!(planned.blocked.is_empty());
    assert_eq!(
        names(planned.adoptions.iter().map(|a| &a.resource)),
        vec!["adopt", "torn"]
    );
    assert!(planned.conflicts[0].mended);
}

#[test]
fn resources_outside_the_scope_are_counted_and_never_touched() {
    let spec = spec("  scope:\n    kinds: [Pipe]\n  defaultOperator: op-2\n");
    let inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            res(CamelKind::Integration, "it", Some("op-1"), None, &[]),
            res(CamelKind::Pipe, "pipe", Some("op-1"), None, &[]),
        ],
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(planned.unchanged.out_of_scope, 1);
    assert_eq!(names(planned.moves().map(|m| &m.resource)), vec!["pipe"]);
}

#[test]
fn planning_between_revisions_ignores_the_owner_keys() {
    let base = spec("  defaultOperator: op-1\n");
    let head = spec(
        "  defaultOperator: op-1\n  rules:\n    - match: {names: [\"b*\"]}\n      operator: op-2\n",
    );
    // The live keys say op-2 for everything; a pull request's plan is about the manifests.
    let inventory = Inventory {
        keys_guarded: false,
        resources: ["alpha", "beta"]
            .iter()
            .map(|n| res(CamelKind::Integration, n, Some("op-2"), None, &[]))
            .collect(),
    };
    let planned = plan::plan(&head, Actual::Manifest(&base), &inventory);
    let moves: Vec<_> = planned
        .moves()
        .map(|m| (m.resource.name.as_str(), m.from.as_str(), m.to.as_str()))
        .collect();
    assert_eq!(moves, vec![("beta", "op-1", "op-2")]);
    assert_eq!(
        planned.unchanged.by_operator.get(&"op-1".parse().unwrap()),
        Some(&1)
    );
}

#[test]
fn pins_of_missing_resources_are_noted() {
    let spec = spec(
        "  defaultOperator: op-1\n  pins:\n    - {kind: Pipe, namespace: shop, name: later, operator: op-2}\n",
    );
    let planned = plan::plan(&spec, Actual::OwnerKeys, &Inventory::default());
    assert_eq!(planned.notes.len(), 1);
    assert!(planned.notes[0].contains("Pipe shop/later, which does not exist"));
    assert!(!planned.has_changes());
}

/// An Integration `name` created by the Pipe of the same name.
fn pipe_integration(name: &str, owner: Option<&str>, phase: Option<&str>) -> Resource {
    let mut it = res(CamelKind::Integration, name, owner, phase, &[]);
    it.created_by = Some(ResourceRef {
        kind: CamelKind::Pipe,
        namespace: "shop".into(),
        name: name.into(),
    });
    it
}

#[test]
fn an_integration_created_by_a_pipe_goes_where_its_pipe_goes_in_the_same_batch() {
    // Pipes p-a..p-d move to op-2 by rule in steps of 1 then the rest; the
    // manifest alone would keep their Integrations on op-1 (the default).
    let spec = spec(
        "  defaultOperator: op-1\n  rules:\n    - match:\n        kinds: [Pipe]\n      operator: op-2\n  rollout:\n    steps: [1]\n",
    );
    let mut resources = Vec::new();
    for name in ["p-a", "p-b", "p-c"] {
        resources.push(res(CamelKind::Pipe, name, Some("op-1"), Some("Ready"), &[]));
        resources.push(pipe_integration(name, Some("op-1"), Some("Running")));
    }
    // Its Pipe is already on op-2: the Integration catches up in step 1.
    resources.push(res(
        CamelKind::Pipe,
        "p-d",
        Some("op-2"),
        Some("Ready"),
        &[],
    ));
    resources.push(pipe_integration("p-d", Some("op-1"), Some("Running")));
    // A plain Integration keeps the default.
    resources.push(res(
        CamelKind::Integration,
        "plain",
        Some("op-1"),
        None,
        &[],
    ));
    let planned = plan::plan(&spec, Actual::OwnerKeys, &Inventory::from(resources));

    let batches: Vec<(usize, Vec<(CamelKind, &str)>)> = planned
        .batches
        .iter()
        .map(|b| {
            (
                b.step,
                b.moves
                    .iter()
                    .map(|m| (m.resource.kind, m.resource.name.as_str()))
                    .collect(),
            )
        })
        .collect();
    use CamelKind::{Integration, Pipe};
    assert_eq!(
        batches,
        vec![
            (
                1,
                vec![(Integration, "p-a"), (Integration, "p-d"), (Pipe, "p-a")]
            ),
            (
                2,
                vec![
                    (Integration, "p-b"),
                    (Integration, "p-c"),
                    (Pipe, "p-b"),
                    (Pipe, "p-c")
                ]
            ),
        ]
    );
    let follower = planned
        .moves()
        .find(|m| m.resource.kind == Integration && m.resource.name == "p-b")
        .unwrap();
    assert_eq!(follower.to.as_str(), "op-2");
    assert_eq!(
        follower.because,
        Reason::Follows {
            kind: Pipe,
            name: "p-b".into()
        }
    );
    assert_eq!(follower.because.to_string(), "follows its Pipe p-b");
    assert_eq!(planned.unchanged.total, 2, "p-d's Pipe and the plain one");
}

#[test]
fn an_integration_waits_while_its_pipe_is_blocked() {
    let spec = spec("  defaultOperator: op-2\n");
    let resources = vec![
        res(CamelKind::Pipe, "p", Some("op-1"), Some("Creating"), &[]),
        pipe_integration("p", Some("op-1"), Some("Running")),
    ];
    let planned = plan::plan(&spec, Actual::OwnerKeys, &Inventory::from(resources));
    assert_eq!(planned.move_count(), 0);
    let blocked: Vec<(CamelKind, String)> = planned
        .blocked
        .iter()
        .map(|b| (b.change.resource.kind, b.why.to_string()))
        .collect();
    assert_eq!(
        blocked,
        vec![
            (
                CamelKind::Integration,
                "phase `Creating`: its Pipe p cannot move yet: its Integration is being created"
                    .to_string()
            ),
            (
                CamelKind::Pipe,
                "phase `Creating`: its Integration is being created".to_string()
            ),
        ]
    );
}

#[test]
fn a_pipe_outside_the_scope_leaves_its_integration_to_the_manifest() {
    let spec = spec(
        "  scope:\n    kinds: [Integration]\n  defaultOperator: op-1\n  rules:\n    - match:\n        names: [\"p\"]\n        kinds: [Integration]\n      operator: op-2\n",
    );
    let resources = vec![
        res(CamelKind::Pipe, "p", Some("op-1"), Some("Ready"), &[]),
        pipe_integration("p", Some("op-1"), Some("Running")),
    ];
    let planned = plan::plan(&spec, Actual::OwnerKeys, &Inventory::from(resources));
    let only = planned.moves().next().unwrap();
    assert_eq!(only.resource.kind, CamelKind::Integration);
    assert!(matches!(only.because, Reason::Rule { .. }));
}

/// A resource as `kamel run -x` creates it: the owner annotation, no label.
fn kamel_created(name: &str, owner: &str) -> Resource {
    let mut r = res(CamelKind::Integration, name, None, Some("Running"), &[]);
    r.owner_annotation = Some(owner.into());
    r
}

#[test]
fn an_owner_named_by_its_annotation_alone_is_read_like_a_label() {
    let spec = spec(
        "  defaultOperator: op-1\n  pins:\n    - kind: Integration\n      namespace: shop\n      name: moving\n      operator: op-2\n",
    );
    let inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            kamel_created("moving", "op-1"),
            kamel_created("staying", "op-1"),
        ],
    };
    let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    // The annotation's operator is the owner: a move, not a first assignment.
    assert!(planned.first_assignments.is_empty());
    let moves: Vec<_> = planned.moves().collect();
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].resource.name, "moving");
    assert_eq!(moves[0].from.as_str(), "op-1");
    // Already with its desired owner: unchanged, and adopted (label added).
    assert_eq!(planned.unchanged.total, 1);
    assert_eq!(
        names(planned.adoptions.iter().map(|a| &a.resource)),
        vec!["staying"]
    );
    assert_eq!(planned.adoptions[0].to.as_str(), "op-1");
}

#[test]
fn a_labelled_resource_is_never_adopted_and_a_pull_request_plan_adopts_nothing() {
    let spec = spec("  defaultOperator: op-1\n");
    let inventory = Inventory {
        keys_guarded: false,
        resources: vec![
            res(
                CamelKind::Integration,
                "ours",
                Some("op-1"),
                Some("Running"),
                &[],
            ),
            kamel_created("theirs", "op-1"),
        ],
    };
    let live = plan::plan(&spec, Actual::OwnerKeys, &inventory);
    assert_eq!(
        names(live.adoptions.iter().map(|a| &a.resource)),
        vec!["theirs"]
    );
    let pr = plan::plan(&spec, Actual::Manifest(&spec), &inventory);
    assert!(pr.adoptions.is_empty());
    assert!(!pr.has_changes());
}
