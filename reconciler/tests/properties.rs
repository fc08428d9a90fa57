//! Property tests of precedence, planning, batching, validation and edits.

use std::collections::BTreeMap;

use camelk_reconciler::api::{
    Match, Operator, OperatorAssignmentSpec, OperatorId, Pin, Protocol, Rule, Scope, Step,
    glob_matches,
};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::inventory::{Inventory, Resource, ResourceRef};
use camelk_reconciler::manifest::{Manifest, Severity, edit};
use camelk_reconciler::plan::{self, Actual, Desired, Reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use proptest::prelude::*;

const OPERATORS: [&str; 3] = ["op-a", "op-b", "op-c"];
const NAMESPACES: [&str; 3] = ["shop", "billing", "search"];
const NAMES: [&str; 5] = ["orders", "orders-eu", "pay-1", "invoice", "canary-x"];
const GLOBS: [&str; 5] = ["orders*", "pay-?", "*", "canary-*", "invoice"];

fn id(i: usize) -> OperatorId {
    OperatorId::new(OPERATORS[i]).unwrap()
}

fn kind() -> impl Strategy<Value = CamelKind> {
    prop::sample::select(CamelKind::ALL.to_vec())
}

fn resource() -> impl Strategy<Value = Resource> {
    (
        kind(),
        0..3usize,
        0..5usize,
        any::<bool>(),
        prop::option::of(0..3usize),
        prop::option::of(0..3usize),
        any::<bool>(),
    )
        .prop_map(|(kind, ns, name, gold, label, annotation, from_pipe)| {
            let mut labels = BTreeMap::new();
            if gold {
                labels.insert("tier".to_string(), "gold".to_string());
            }
            if let Some(owner) = label {
                labels.insert(OPERATOR_ID_KEY.to_string(), OPERATORS[owner].to_string());
            }
            Resource {
                id: ResourceRef {
                    kind,
                    namespace: NAMESPACES[ns].into(),
                    name: NAMES[name].into(),
                },
                labels: labels.into_iter().collect(),
                owner_annotation: annotation.map(|o| OPERATORS[o].to_string()),
                phase: None,
                in_flight: None,
                // As a Pipe names the Integration it creates after itself.
                created_by: (from_pipe && kind == CamelKind::Integration).then(|| ResourceRef {
                    kind: CamelKind::Pipe,
                    namespace: NAMESPACES[ns].into(),
                    name: NAMES[name].into(),
                }),
                key_managers: Default::default(),
            }
        })
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        prop::collection::vec(kind(), 0..2),
        prop::collection::vec(0..3usize, 0..2),
        prop::collection::vec(0..5usize, 0..2),
        any::<bool>(),
        0..3usize,
    )
        .prop_map(|(kinds, namespaces, globs, gold, operator)| Rule {
            name: None,
            matches: Match {
                kinds,
                namespaces: namespaces
                    .into_iter()
                    .map(|n| NAMESPACES[n].to_string())
                    .collect(),
                names: globs.into_iter().map(|g| GLOBS[g].to_string()).collect(),
                selector: gold.then(|| LabelSelector {
                    match_labels: Some([("tier".to_string(), "gold".to_string())].into()),
                    match_expressions: None,
                }),
            },
            operator: id(operator),
        })
}

fn spec() -> impl Strategy<Value = OperatorAssignmentSpec> {
    (
        prop::collection::vec(rule(), 0..5),
        prop::collection::vec((kind(), 0..3usize, 0..5usize, 0..3usize), 0..6),
        0..3usize,
        prop::collection::vec(kind(), 0..3),
    )
        .prop_map(|(rules, pins, default, scope_kinds)| {
            let mut seen = std::collections::HashSet::new();
            let pins = pins
                .into_iter()
                .filter(|(k, ns, n, _)| seen.insert((*k, *ns, *n)))
                .map(|(kind, ns, name, op)| Pin {
                    kind,
                    namespace: NAMESPACES[ns].into(),
                    name: NAMES[name].into(),
                    operator: id(op),
                })
                .collect();
            OperatorAssignmentSpec {
                operators: (0..3)
                    .map(|i| Operator {
                        id: id(i),
                        namespace: "camel-k".into(),
                        protocol: Protocol::Handoff,
                        handles_unowned: false,
                    })
                    .collect(),
                scope: Scope {
                    namespaces: Vec::new(),
                    kinds: scope_kinds,
                },
                default_operator: id(default),
                rules,
                pins,
                staged_moves: Vec::new(),
                rollout: Default::default(),
                handoff: Default::default(),
                drift_policy: Default::default(),
                notifications: Vec::new(),
            }
        })
}

/// Precedence restated as plainly as possible: pin, first rule, default.
fn reference_owner(spec: &OperatorAssignmentSpec, r: &Resource) -> Option<OperatorId> {
    if !spec.scope.kinds.is_empty() && !spec.scope.kinds.contains(&r.id.kind) {
        return None;
    }
    for pin in &spec.pins {
        if pin.kind == r.id.kind && pin.namespace == r.id.namespace && pin.name == r.id.name {
            return Some(pin.operator.clone());
        }
    }
    for rule in &spec.rules {
        let m = &rule.matches;
        let kind_ok = m.kinds.is_empty() || m.kinds.contains(&r.id.kind);
        let ns_ok = m.namespaces.is_empty() || m.namespaces.contains(&r.id.namespace);
        let name_ok = m.names.is_empty() || m.names.iter().any(|g| glob_matches(g, &r.id.name));
        let sel_ok =
            m.selector.is_none() || r.labels.get("tier").map(String::as_str) == Some("gold");
        if kind_ok && ns_ok && name_ok && sel_ok {
            return Some(rule.operator.clone());
        }
    }
    Some(spec.default_operator.clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn precedence_is_pin_then_first_rule_then_default(spec in spec(), resources in prop::collection::vec(resource(), 1..20)) {
        let desired = Desired::new(&spec);
        for r in &resources {
            let decision = desired.decide(r);
            prop_assert_eq!(decision.as_ref().map(|d| d.operator.clone()), reference_owner(&spec, r));
            if let Some(d) = decision {
                let pinned = spec.pins.iter().any(|p| p.kind == r.id.kind && p.namespace == r.id.namespace && p.name == r.id.name);
                prop_assert_eq!(pinned, matches!(d.because, Reason::Pin { .. }));
            }
        }
    }

    #[test]
    fn every_resource_lands_in_exactly_one_place_and_order_does_not_matter(
        spec in spec(),
        resources in prop::collection::vec(resource(), 0..40),
        seed in any::<u64>(),
    ) {
        // Keep one entry per identity, as a cluster does.
        let mut unique = BTreeMap::new();
        for r in resources {
            unique.insert(r.id.clone(), r);
        }
        let resources: Vec<Resource> = unique.into_values().collect();
        let inventory = Inventory::from(resources.clone());
        let planned = plan::plan(&spec, Actual::OwnerKeys, &inventory);
        let total = planned.move_count() + planned.first_assignments.len() + planned.blocked.len()
            + planned.errors.len() + planned.unchanged.total + planned.unchanged.out_of_scope;
        prop_assert_eq!(total, resources.len());
        for m in planned.moves() {
            prop_assert_ne!(&m.from, &m.to);
        }

        let mut shuffled = resources;
        let n = shuffled.len();
        for i in 0..n {
            let j = (seed as usize).wrapping_mul(i + 7) % n.max(1);
            shuffled.swap(i, j);
        }
        let again = plan::plan(&spec, Actual::OwnerKeys, &Inventory::from(shuffled));
        prop_assert_eq!(&planned, &again);

        // An Integration that follows its Pipe moves in the Pipe's batch.
        let step_of = |r: &ResourceRef| {
            planned.batches.iter().find(|b| b.moves.iter().any(|m| &m.resource == r)).map(|b| b.step)
        };
        for m in planned.moves() {
            if let Reason::Follows { kind, name } = &m.because {
                let pipe = ResourceRef { kind: *kind, namespace: m.resource.namespace.clone(), name: name.clone() };
                if let Some(pipe_step) = step_of(&pipe) {
                    prop_assert_eq!(step_of(&m.resource), Some(pipe_step));
                }
            }
        }
    }

    #[test]
    fn a_manifest_planned_against_itself_changes_nothing(spec in spec(), resources in prop::collection::vec(resource(), 0..30)) {
        let planned = plan::plan(&spec, Actual::Manifest(&spec), &Inventory::from(resources));
        prop_assert!(planned.batches.is_empty() && planned.first_assignments.is_empty() && planned.blocked.is_empty());
    }

    #[test]
    fn batches_keep_order_and_follow_cumulative_steps(
        n in 0usize..200,
        mut percents in prop::collection::vec(1u64..=100, 0..5),
    ) {
        percents.sort_unstable();
        percents.dedup();
        let steps: Vec<Step> = percents.iter().map(|p| Step::Percent(*p)).collect();
        let batches = plan::split_into_batches((0..n).collect::<Vec<_>>(), &steps);
        let flat: Vec<usize> = batches.iter().flat_map(|(_, b)| b.clone()).collect();
        prop_assert_eq!(flat, (0..n).collect::<Vec<_>>());
        let mut done = 0;
        for (step, b) in &batches {
            prop_assert!(!b.is_empty());
            done += b.len();
            if let Some(target) = steps.get(step - 1) {
                prop_assert_eq!(done, target.target(n));
            } else {
                prop_assert_eq!(done, n);
            }
        }
    }

    #[test]
    fn assign_then_unassign_restores_the_manifest(name in "[a-z][a-z0-9-]{0,20}[a-z0-9]", ns in 0..3usize, op in 0..2usize) {
        let text = include_str!("fixtures/commented.yaml");
        let manifest = Manifest::parse("m.yaml", text.to_string()).unwrap();
        let r = ResourceRef { kind: CamelKind::Integration, namespace: NAMESPACES[ns].into(), name };
        prop_assume!(!(r.namespace == "shop" && r.name == "orders"));
        let to = OperatorId::new(["operator-1", "operator-2"][op]).unwrap();
        let assigned = edit::assign(&manifest, std::slice::from_ref(&r), &to).unwrap();
        let after = Manifest::parse("m.yaml", assigned.text.clone()).unwrap();
        prop_assert!(after.assignment.spec.pins.iter().any(|p| p.name == r.name && p.operator == to));
        prop_assert!(assigned.text.starts_with(&text[..text.find("  # end of pins").unwrap()]));
        let restored = edit::unassign(&after, &[r]).unwrap();
        prop_assert_eq!(restored.text, text);
    }

    #[test]
    fn a_second_pin_for_one_resource_is_always_rejected(ns in 0..3usize, name in 0..5usize, a in 0..2usize, b in 0..2usize) {
        let pin = |op: usize| format!(
            "    - kind: Integration\n      namespace: {}\n      name: {}\n      operator: operator-{}\n",
            NAMESPACES[ns], NAMES[name], op + 1
        );
        let text = format!(
            "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: x\nspec:\n  operators:\n    - id: operator-1\n      namespace: a\n    - id: operator-2\n      namespace: a\n  defaultOperator: operator-1\n  pins:\n{}{}",
            pin(a), pin(b)
        );
        let error = Manifest::parse("x.yaml", text).unwrap_err();
        let first = &error.diagnostics()[0];
        prop_assert_eq!(first.severity, Severity::Error);
        prop_assert_eq!(first.at.line, 17);
        prop_assert!(first.message.contains("is pinned twice"));
    }
}

/// How one pin is written in a generated manifest.
#[derive(Clone, Debug)]
struct PinText {
    flow: bool,
    /// 0 plain, 1 single-quoted, 2 double-quoted operator.
    quotes: usize,
    trailing_comment: bool,
    blank_before: bool,
    comment_before: bool,
}

fn pin_text() -> impl Strategy<Value = PinText> {
    (
        prop::bool::weighted(0.3),
        0..3usize,
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(flow, quotes, trailing_comment, blank_before, comment_before)| PinText {
                flow,
                quotes,
                trailing_comment,
                blank_before,
                comment_before,
            },
        )
}

/// A manifest whose pins are written in assorted styles, and what follows
/// the list (nothing, a comment, another key).
fn styled_manifest(pins: &[(PinText, usize)], dash: usize, after: usize) -> String {
    let mut text = String::from(
        "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: t\nspec:\n  operators:\n    - id: op-a\n      namespace: camel-k\n    - id: op-b\n      namespace: camel-k\n    - id: op-c\n      namespace: camel-k\n  defaultOperator: op-a\n  pins:\n",
    );
    let pad = " ".repeat(dash);
    for (i, (style, op)) in pins.iter().enumerate() {
        let op = match style.quotes {
            0 => OPERATORS[*op].to_string(),
            1 => format!("'{}'", OPERATORS[*op]),
            _ => format!("\"{}\"", OPERATORS[*op]),
        };
        let comment = if style.trailing_comment {
            "   # note"
        } else {
            ""
        };
        if style.blank_before {
            text.push('\n');
        }
        if style.comment_before {
            text.push_str(&format!("{pad}# about pin {i}\n"));
        }
        if style.flow {
            text.push_str(&format!(
                "{pad}- {{kind: Integration, namespace: shop, name: app-{i}, operator: {op}}}{comment}\n"
            ));
        } else {
            text.push_str(&format!(
                "{pad}- kind: Integration\n{pad}  namespace: shop\n{pad}  name: app-{i}\n{pad}  operator: {op}{comment}\n"
            ));
        }
    }
    match after {
        0 => {}
        1 => text.push_str("  # end of pins\n"),
        2 => text.push_str("\n  rollout:\n    pause: 2m\n"),
        _ => text.push_str("# the end\n"),
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The splice path writes exactly the bytes of the general path, and
    /// its manifest (tree, positions, warnings) is that of a fresh parse.
    #[test]
    fn the_splice_writes_what_the_general_path_writes(
        pins in prop::collection::vec((pin_text(), 0..3usize), 1..8),
        dash in prop::sample::select(vec![2usize, 4]),
        after in 0..4usize,
        targets in prop::collection::vec((0..10usize, 0..3usize), 1..4),
        unpin in any::<bool>(),
    ) {
        let text = styled_manifest(&pins, dash, after);
        let manifest = Manifest::parse("t.yaml", text.clone()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let resources: Vec<ResourceRef> = targets
            .iter()
            .map(|(i, _)| ResourceRef {
                kind: CamelKind::Integration,
                namespace: "shop".into(),
                name: format!("app-{i}"),
            })
            .collect();
        let (fast, general) = if unpin {
            let mut named: Vec<ResourceRef> = Vec::new();
            for r in resources.into_iter().filter(|r| manifest.assignment.spec.pins.iter().any(|p| p.name == r.name)) {
                if !named.contains(&r) {
                    named.push(r);
                }
            }
            (edit::unassign(&manifest, &named), edit::unassign_general(&manifest, &named))
        } else {
            let to = id(targets[0].1);
            (edit::assign(&manifest, &resources, &to), edit::assign_general(&manifest, &resources, &to))
        };
        match (fast, general) {
            (Ok(fast), Ok(general)) => {
                prop_assert_eq!(&fast.text, &general.text, "{}", text);
                prop_assert_eq!(&fast.changes, &general.changes);
                let parsed = Manifest::parse("t.yaml", fast.text.clone()).unwrap();
                let (got, want) = (format!("{:#?}", fast.manifest.tree), format!("{:#?}", parsed.tree));
                let first_difference = got.lines().zip(want.lines()).enumerate().find(|(_, (a, b))| a != b);
                prop_assert!(got == want, "tree differs at {:?}\n{}", first_difference, fast.text);
                prop_assert_eq!(&fast.manifest.assignment.spec, &parsed.assignment.spec);
                prop_assert_eq!(&fast.manifest.warnings, &parsed.warnings);
            }
            (Err(fast), Err(general)) => prop_assert_eq!(fast.to_string(), general.to_string()),
            (fast, general) => prop_assert!(false, "{:?} vs {:?}\n{}", fast.map(|e| e.text), general.map(|e| e.text), text),
        }
    }
}

proptest! {
    /// Manifests written by the serializer read the same from the tree as
    /// through `serde-saphyr`.
    #[test]
    fn the_tree_reader_reads_what_serde_saphyr_reads(spec in spec()) {
        use camelk_reconciler::manifest::{Tree, from_tree};
        let text = format!(
            "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: t\n  labels: {{team: a, tier: \"1\"}}\nspec:\n{}",
            serde_saphyr::to_string(&spec)
                .unwrap()
                .lines()
                .map(|l| format!("  {l}\n"))
                .collect::<String>()
        );
        let reference: camelk_reconciler::api::OperatorAssignment =
            serde_saphyr::from_str(&text).unwrap();
        let tree = Tree::parse(&text).unwrap();
        match from_tree::<camelk_reconciler::api::OperatorAssignment>(&tree.root) {
            Ok(ours) => {
                prop_assert_eq!(&ours.spec, &reference.spec);
                prop_assert_eq!(&ours.metadata, &reference.metadata);
            }
            Err(e) => prop_assert!(false, "{e}\n{text}"),
        }
    }
}
