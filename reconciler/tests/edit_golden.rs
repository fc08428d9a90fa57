//! Golden tests: each edit of a heavily commented manifest changes exactly
//! the expected lines (the unified diff is the snapshot), and everything else
//! stays byte-identical.

use camelk_reconciler::api::{OperatorId, Step};
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::inventory::ResourceRef;
use camelk_reconciler::manifest::{Manifest, edit};

const COMMENTED: &str = include_str!("fixtures/commented.yaml");

fn manifest() -> Manifest {
    Manifest::parse("commented.yaml", COMMENTED.to_string()).unwrap_or_else(|e| panic!("{e}"))
}

fn id(s: &str) -> OperatorId {
    OperatorId::new(s).unwrap()
}

fn resource(kind: CamelKind, ns: &str, name: &str) -> ResourceRef {
    ResourceRef {
        kind,
        namespace: ns.into(),
        name: name.into(),
    }
}

/// [`edit::assign`] of the one resource `kind ns/name` to `to`.
fn assign_one(
    m: &Manifest,
    kind: CamelKind,
    ns: &str,
    name: &str,
    to: &str,
) -> Result<edit::Edited, edit::EditError> {
    edit::assign(m, &[resource(kind, ns, name)], &id(to))
}

/// [`edit::assign`] of shop/orders to operator-2 in manifest `text`.
fn assign_orders_to_operator_2(text: &str) -> edit::Edited {
    let m = Manifest::parse("x.yaml", text.to_string()).unwrap();
    assign_one(&m, CamelKind::Integration, "shop", "orders", "operator-2").unwrap()
}

/// The unified diff, without headers; only changed lines and their context.
fn diff(old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(1)
        .to_string()
}

/// Lines removed and added, in order (what `git diff --stat` counts).
fn changed_lines(old: &str, new: &str) -> (Vec<String>, Vec<String>) {
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for change in similar::TextDiff::from_lines(old, new).iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Delete => removed.push(change.value().trim_end().to_string()),
            similar::ChangeTag::Insert => added.push(change.value().trim_end().to_string()),
            similar::ChangeTag::Equal => {}
        }
    }
    (removed, added)
}

#[test]
fn reassigning_a_pin_changes_one_line_and_keeps_its_quotes() {
    let m = manifest();
    let edited = assign_one(&m, CamelKind::Integration, "shop", "orders", "operator-2").unwrap();
    let (removed, added) = changed_lines(COMMENTED, &edited.text);
    assert_eq!(
        removed,
        vec!["      operator: 'operator-1'   # single-quoted on purpose"]
    );
    assert_eq!(
        added,
        vec!["      operator: 'operator-2'   # single-quoted on purpose"]
    );
    assert_eq!(
        edited.changes,
        vec!["Integration shop/orders: operator-1 -> operator-2"]
    );
}

#[test]
fn a_new_pin_is_appended_after_the_last_one() {
    let m = manifest();
    let edited = assign_one(
        &m,
        CamelKind::Integration,
        "billing",
        "ledger",
        "operator-2",
    )
    .unwrap();
    let (removed, _) = changed_lines(COMMENTED, &edited.text);
    assert!(removed.is_empty(), "{removed:?}");
    insta::assert_snapshot!(diff(COMMENTED, &edited.text));
}

#[test]
fn assigning_several_resources_at_once() {
    let m = manifest();
    let edited = edit::assign(
        &m,
        &[
            resource(CamelKind::Pipe, "shop", "events"),
            resource(CamelKind::Integration, "search", "indexer"),
        ],
        &id("operator-1"),
    )
    .unwrap();
    insta::assert_snapshot!(diff(COMMENTED, &edited.text));
    assert_eq!(edited.changes.len(), 2);
}

#[test]
fn assigning_to_the_current_pin_changes_nothing() {
    let m = manifest();
    let edited = assign_one(&m, CamelKind::Integration, "shop", "orders", "operator-1").unwrap();
    assert_eq!(edited.text, COMMENTED);
    assert!(edited.changes.is_empty());
}

#[test]
fn unassign_removes_only_the_pin() {
    let m = manifest();
    let edited = edit::unassign(&m, &[resource(CamelKind::Pipe, "shop", "events")]).unwrap();
    let (removed, added) = changed_lines(COMMENTED, &edited.text);
    assert_eq!(
        removed,
        vec!["    - {kind: Pipe, namespace: shop, name: events, operator: operator-2}"]
    );
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(
        edited.changes,
        vec!["Pipe shop/events: unpinned from operator-2, now operator-1 (by default)"]
    );
}

#[test]
fn unassign_of_an_unpinned_resource_is_refused() {
    let m = manifest();
    let error = edit::unassign(&m, &[resource(CamelKind::Pipe, "shop", "nope")]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Pipe shop/nope is not pinned in commented.yaml; nothing to unassign"
    );
}

#[test]
fn rollout_appends_a_staged_move_section() {
    let m = manifest();
    let steps = [Step::Percent(10), Step::Percent(50), Step::Percent(100)];
    let edited = edit::rollout(&m, &id("operator-1"), &id("operator-2"), &steps, None).unwrap();
    let (removed, _) = changed_lines(COMMENTED, &edited.text);
    assert!(removed.is_empty(), "{removed:?}");
    insta::assert_snapshot!(diff(COMMENTED, &edited.text));
    let again = Manifest::parse("commented.yaml", edited.text).unwrap();
    assert_eq!(again.assignment.spec.staged_moves[0].steps, steps);
}

#[test]
fn rollout_with_a_selector() {
    let m = manifest();
    let selector = camelk_reconciler::api::parse_selector("tier=gold,region in (eu, us)").unwrap();
    let edited = edit::rollout(
        &m,
        &id("operator-1"),
        &id("operator-2"),
        &[Step::Count(5)],
        Some(("tier=gold,region in (eu, us)", &selector)),
    )
    .unwrap();
    insta::assert_snapshot!(diff(COMMENTED, &edited.text));
    let again = Manifest::parse("commented.yaml", edited.text).unwrap();
    assert_eq!(
        again.assignment.spec.staged_moves[0].selector,
        Some(selector)
    );
}

#[test]
fn edits_refuse_unknown_operators_with_a_suggestion() {
    let m = manifest();
    let error = assign_one(&m, CamelKind::Integration, "shop", "orders", "operater-2").unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown operator `operater-2`; did you mean `operator-2`?; declared operators: operator-1, operator-2"
    );
}

#[test]
fn a_pin_outside_the_scope_is_refused() {
    let m = manifest();
    let error = assign_one(&m, CamelKind::Build, "shop", "b1", "operator-2").unwrap_err();
    assert!(error.to_string().contains("outside the scope"), "{error}");
}

#[test]
fn an_empty_flow_list_becomes_a_block_list() {
    let text = COMMENTED.replace(
        "  pins:\n    # Orders must stay put during the sale.\n    - kind: Integration\n      namespace: shop\n      name: orders\n      operator: 'operator-1'   # single-quoted on purpose\n\n    - {kind: Pipe, namespace: shop, name: events, operator: operator-2}\n",
        "  pins: []\n",
    );
    let edited = assign_orders_to_operator_2(&text);
    insta::assert_snapshot!(diff(&text, &edited.text));
}

#[test]
fn a_missing_list_is_created() {
    let text = COMMENTED.replace(
        "  # ---- pins: single resources ------------------------------------------\n  pins:\n    # Orders must stay put during the sale.\n    - kind: Integration\n      namespace: shop\n      name: orders\n      operator: 'operator-1'   # single-quoted on purpose\n\n    - {kind: Pipe, namespace: shop, name: events, operator: operator-2}\n  # end of pins\n",
        "",
    );
    let edited = assign_orders_to_operator_2(&text);
    let again = Manifest::parse("x.yaml", edited.text.clone()).unwrap();
    assert_eq!(again.assignment.spec.pins.len(), 1);
    insta::assert_snapshot!(diff(&text, &edited.text));
}

/// The pin edits above take the splice path, and it writes exactly the bytes
/// of the general (`yaml-edit`) path, with the manifest a fresh parse gives.
#[test]
fn the_splice_writes_the_bytes_of_the_general_path() {
    use edit::EditPath;
    let m = manifest();
    let check = |fast: edit::Edited, general: edit::Edited, path: EditPath| {
        assert_eq!(fast.path, path, "{}", fast.text);
        assert_eq!(general.path, EditPath::General);
        assert_eq!(fast.text, general.text);
        assert_eq!(fast.changes, general.changes);
        let parsed = Manifest::parse("commented.yaml", fast.text.clone()).unwrap();
        assert_eq!(
            format!("{:?}", fast.manifest.tree),
            format!("{:?}", parsed.tree)
        );
        assert_eq!(fast.manifest.assignment.spec, parsed.assignment.spec);
        assert_eq!(
            fast.manifest.assignment.metadata,
            parsed.assignment.metadata
        );
        assert_eq!(fast.manifest.warnings, parsed.warnings);
    };
    let assigns = [
        (
            vec![resource(CamelKind::Integration, "shop", "orders")],
            "operator-2",
        ),
        (
            vec![resource(CamelKind::Integration, "billing", "ledger")],
            "operator-2",
        ),
        (
            vec![
                resource(CamelKind::Pipe, "shop", "events"),
                resource(CamelKind::Integration, "search", "indexer"),
            ],
            "operator-1",
        ),
    ];
    for (resources, to) in assigns {
        check(
            edit::assign(&m, &resources, &id(to)).unwrap(),
            edit::assign_general(&m, &resources, &id(to)).unwrap(),
            EditPath::Splice,
        );
    }
    // A pin next to a blank line or under a comment: the general path
    // decides what becomes of them.
    let events = [resource(CamelKind::Pipe, "shop", "events")];
    check(
        edit::unassign(&m, &events).unwrap(),
        edit::unassign_general(&m, &events).unwrap(),
        EditPath::General,
    );
    let orders = [resource(CamelKind::Integration, "shop", "orders")];
    check(
        edit::unassign(&m, &orders).unwrap(),
        edit::unassign_general(&m, &orders).unwrap(),
        EditPath::General,
    );
}
