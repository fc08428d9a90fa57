//! The plan engine on arbitrary inventories and two arbitrary manifests
//! (a head and a base), drawn from small alphabets so that ids, namespaces,
//! names, labels and owners collide. Checks every promise of the plan
//! (`camelk_fuzz::check_plan`) and rollout batching (`plan::split_into_batches`).
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use camelk_reconciler::api::{
    Labels, Match, Operator, OperatorAssignmentSpec, OperatorId, Pin, Protocol, Rule, Scope,
    StagedMove, Step,
};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::inventory::{Inventory, KeyManagers, Resource, ResourceRef};
use camelk_reconciler::plan::{BlockReason, split_into_batches};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use libfuzzer_sys::fuzz_target;

/// Declared operators; `op-d` is named by rules but never declared.
const OPERATORS: [&str; 4] = ["op-a", "op-b", "op-c", "op-d"];
/// Owner key values: operators, an empty value and an invalid id.
const OWNERS: [&str; 6] = ["op-a", "op-b", "op-c", "op-d", "", "Not_An.Id"];
const NAMESPACES: [&str; 3] = ["shop", "billing", "search"];
const NAMES: [&str; 5] = ["orders", "orders-eu", "pay-1", "canary-x", "events"];
const GLOBS: [&str; 6] = ["orders*", "pay-?", "*", "canary-*", "events", "[x]"];
const LABEL_KEYS: [&str; 3] = ["tier", "app", OPERATOR_ID_KEY];
const LABEL_VALUES: [&str; 3] = ["gold", "x", "op-b"];
const OPS: [&str; 5] = ["In", "NotIn", "Exists", "DoesNotExist", "Bogus"];
const PHASES: [&str; 8] = [
    "Running",
    "Initialization",
    "Building Kit",
    "Deploying",
    "Error",
    "Ready",
    "Build Running",
    "",
];

fn pick<T: Copy>(list: &[T], i: u8) -> T {
    list[i as usize % list.len()]
}

fn kind(i: u8) -> CamelKind {
    pick(&CamelKind::ALL, i)
}

fn operator(i: u8) -> OperatorId {
    OperatorId::new(pick(&OPERATORS, i)).expect("valid id")
}

#[derive(Arbitrary, Debug)]
struct ResourceIn {
    kind: u8,
    namespace: u8,
    name: u8,
    labels: Vec<(u8, u8)>,
    label_owner: Option<u8>,
    annotation_owner: Option<u8>,
    phase: Option<u8>,
    in_flight: bool,
    /// An Integration created by the Pipe (or KameletBinding) of this name.
    created_by: Option<(bool, u8)>,
    /// Another tool applies its owner label, its annotation; the reconciler
    /// co-owns them.
    key_managers: (bool, bool, bool),
}

#[derive(Arbitrary, Debug)]
struct SelectorIn {
    labels: Vec<(u8, u8)>,
    expressions: Vec<(u8, u8, Option<Vec<u8>>)>,
}

#[derive(Arbitrary, Debug)]
struct RuleIn {
    kinds: Vec<u8>,
    namespaces: Vec<u8>,
    names: Vec<u8>,
    selector: Option<SelectorIn>,
    operator: u8,
}

#[derive(Arbitrary, Debug)]
enum StepIn {
    Count(u8),
    Percent(u8),
}

#[derive(Arbitrary, Debug)]
struct StagedIn {
    from: u8,
    to: u8,
    selector: Option<SelectorIn>,
    steps: Vec<StepIn>,
}

#[derive(Arbitrary, Debug)]
struct SpecIn {
    default: u8,
    scope_kinds: Vec<u8>,
    scope_namespaces: Vec<u8>,
    rules: Vec<RuleIn>,
    pins: Vec<(u8, u8, u8, u8)>,
    staged: Vec<StagedIn>,
    steps: Vec<StepIn>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    head: SpecIn,
    base: Option<SpecIn>,
    resources: Vec<ResourceIn>,
    /// The owner-keys policy is in force.
    keys_guarded: bool,
    /// Steps and a size for `split_into_batches` on its own.
    split: (Vec<StepIn>, u8),
}

fn selector(s: &SelectorIn) -> LabelSelector {
    let labels: BTreeMap<String, String> = s
        .labels
        .iter()
        .map(|&(k, v)| (pick(&LABEL_KEYS, k).into(), pick(&LABEL_VALUES, v).into()))
        .collect();
    let expressions: Vec<LabelSelectorRequirement> = s
        .expressions
        .iter()
        .map(|(k, op, values)| LabelSelectorRequirement {
            key: pick(&LABEL_KEYS, *k).into(),
            operator: pick(&OPS, *op).into(),
            values: values
                .as_ref()
                .map(|v| v.iter().map(|&i| pick(&LABEL_VALUES, i).into()).collect()),
        })
        .collect();
    LabelSelector {
        match_labels: (!labels.is_empty()).then_some(labels),
        match_expressions: (!expressions.is_empty()).then_some(expressions),
    }
}

fn step(s: &StepIn) -> Step {
    match *s {
        StepIn::Count(n) => Step::Count(u64::from(n % 8)),
        // Validation keeps percentages at most 100; the engine must not care.
        StepIn::Percent(p) => Step::Percent(u64::from(p)),
    }
}

fn spec(s: &SpecIn) -> OperatorAssignmentSpec {
    OperatorAssignmentSpec {
        operators: OPERATORS[..3]
            .iter()
            .map(|id| Operator {
                id: OperatorId::new(*id).expect("valid id"),
                namespace: "camel-k".into(),
                protocol: Protocol::Handoff,
                handles_unowned: false,
            })
            .collect(),
        scope: Scope {
            kinds: s.scope_kinds.iter().map(|&k| kind(k)).collect(),
            namespaces: s
                .scope_namespaces
                .iter()
                .map(|&n| pick(&NAMESPACES, n).into())
                .collect(),
        },
        default_operator: operator(s.default),
        rules: s
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| Rule {
                name: (i % 2 == 0).then(|| format!("rule-{i}")),
                matches: Match {
                    kinds: r.kinds.iter().map(|&k| kind(k)).collect(),
                    namespaces: r
                        .namespaces
                        .iter()
                        .map(|&n| pick(&NAMESPACES, n).into())
                        .collect(),
                    names: r.names.iter().map(|&g| pick(&GLOBS, g).into()).collect(),
                    selector: r.selector.as_ref().map(selector),
                },
                operator: operator(r.operator),
            })
            .collect(),
        pins: s
            .pins
            .iter()
            .map(|&(k, ns, name, op)| Pin {
                kind: kind(k),
                namespace: pick(&NAMESPACES, ns).into(),
                name: pick(&NAMES, name).into(),
                operator: operator(op),
            })
            .collect(),
        staged_moves: s
            .staged
            .iter()
            .map(|m| StagedMove {
                from: operator(m.from),
                to: operator(m.to),
                selector: m.selector.as_ref().map(selector),
                steps: m.steps.iter().map(step).collect(),
            })
            .collect(),
        rollout: camelk_reconciler::api::RolloutSettings {
            steps: s.steps.iter().map(step).collect(),
            ..Default::default()
        },
        handoff: Default::default(),
        drift_policy: Default::default(),
        notifications: Vec::new(),
    }
}

fn resource(r: &ResourceIn) -> Resource {
    let kind = kind(r.kind);
    let namespace: String = pick(&NAMESPACES, r.namespace).into();
    let mut labels: Labels = r
        .labels
        .iter()
        .map(|&(k, v)| (pick(&LABEL_KEYS, k).into(), pick(&LABEL_VALUES, v).into()))
        .collect();
    match r.label_owner {
        Some(o) => {
            labels.insert(OPERATOR_ID_KEY.into(), pick(&OWNERS, o).into());
        }
        None => {
            labels.remove(OPERATOR_ID_KEY);
        }
    }
    Resource {
        id: ResourceRef {
            kind,
            namespace: namespace.clone(),
            name: pick(&NAMES, r.name).into(),
        },
        labels,
        owner_annotation: r.annotation_owner.map(|o| pick(&OWNERS, o).into()),
        phase: r.phase.map(|p| pick(&PHASES, p).into()),
        in_flight: r.in_flight.then(|| BlockReason::WorkInFlight {
            phase: "Running".into(),
            detail: "a build of its kit runs".into(),
        }),
        created_by: r
            .created_by
            .filter(|_| kind == CamelKind::Integration)
            .map(|(pipe, name)| ResourceRef {
                kind: if pipe {
                    CamelKind::Pipe
                } else {
                    CamelKind::KameletBinding
                },
                namespace,
                name: pick(&NAMES, name).into(),
            }),
        key_managers: KeyManagers {
            label_applier: r.key_managers.0.then(|| "argocd-controller".into()),
            annotation_applier: r.key_managers.1.then(|| "kustomize-controller".into()),
            co_owned: r.key_managers.2,
        },
    }
}

fuzz_target!(|input: Input| {
    let head = spec(&input.head);
    let base = input.base.as_ref().map(spec);
    // Every inventory reader lists a resource once (the file reader refuses
    // a repeated one); keep the first of each id.
    let mut seen = std::collections::HashSet::new();
    let resources: Vec<Resource> = input
        .resources
        .iter()
        .map(resource)
        .filter(|r| seen.insert(r.id.clone()))
        .collect();
    let inventory = Inventory {
        resources,
        keys_guarded: input.keys_guarded,
    };
    camelk_fuzz::plan_and_check(&head, base.as_ref(), &inventory);

    // Batching alone: input order kept, every item once, no empty batch,
    // steps increasing.
    let steps: Vec<Step> = input.split.0.iter().map(step).collect();
    let items: Vec<u8> = (0..input.split.1).collect();
    let batches = split_into_batches(items.clone(), &steps);
    let flat: Vec<u8> = batches
        .iter()
        .flat_map(|(_, b)| b.iter().copied())
        .collect();
    assert_eq!(flat, items);
    assert!(batches.iter().all(|(_, b)| !b.is_empty()));
    assert!(batches.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(
        batches
            .iter()
            .all(|(n, _)| *n >= 1 && *n <= steps.len() + 1)
    );
});
