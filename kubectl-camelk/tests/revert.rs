//! `kubectl camelk revert REV` on real Git repositories: the commit it
//! writes, the plan it prints, `--push`, and the refusals that write nothing.

mod common;

use std::path::Path;

use common::{
    ASSIGN_ORDERS, MANIFEST, SHOP, assert_last_commit_message, bare_remote, camelk, git,
    refuses_and_writes_nothing, repo_with, state, words,
};
use predicates::prelude::*;

fn inventory() -> String {
    common::fixture("inventory.json").display().to_string()
}

const ORDERS_ON_1: &str = "      operator: operator-1   # keep during the sale\n";
const ORDERS_ON_2: &str = "      operator: operator-2   # keep during the sale\n";

/// Runs the plugin in `dir` with `args`, which must succeed: its stdout.
fn run(dir: &Path, args: &[&str]) -> String {
    let output = camelk(dir).args(args).output().unwrap();
    camelk_testkit::assert_success(&output, &format!("{args:?}"));
    String::from_utf8(output.stdout).unwrap()
}

fn head(dir: &Path) -> String {
    git(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

/// Every move of a plan printed with `-o json`, as (resource, from, to), sorted.
fn moves(plan: &str) -> Vec<(String, String, String)> {
    let plan: serde_json::Value = serde_json::from_str(plan).unwrap();
    let mut moves: Vec<_> = plan["batches"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|batch| batch["moves"].as_array().unwrap().iter())
        .map(|m| {
            (
                m["resource"].to_string(),
                m["from"].as_str().unwrap().to_string(),
                m["to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    moves.sort();
    moves
}

/// `assign` of shop/orders to operator-2 on branch `assign`: its commit id.
fn assign_on_a_branch(dir: &Path) -> String {
    run(dir, &[&ASSIGN_ORDERS[..], &["--branch", "assign"]].concat());
    head(dir)
}

/// [`assign_on_a_branch`] (its commit id), then a later commit, `message`,
/// that rewrites the manifest with `edit`.
fn assign_then_edit(dir: &Path, message: &str, edit: impl FnOnce(&str) -> String) -> String {
    let assigned = assign_on_a_branch(dir);
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    std::fs::write(dir.join(MANIFEST), edit(&text)).unwrap();
    git(dir, &["commit", "-q", "-am", message]);
    assigned
}

/// `assign` (its commit id and its plan as JSON), then an unrelated
/// `rollout` on top.
fn assign_then_rollout(dir: &Path) -> (String, String) {
    let plan = run(
        dir,
        &[
            &ASSIGN_ORDERS[..],
            &[
                "--branch",
                "assign",
                "-o",
                "json",
                "--inventory",
                &inventory(),
            ],
        ]
        .concat(),
    );
    let assigned = head(dir);
    run(
        dir,
        &words("rollout --from operator-1 --to operator-2 --steps 10%,100% --branch rollout"),
    );
    (assigned, plan)
}

#[test]
fn revert_undoes_only_the_commits_lines_on_a_new_branch_and_plans_the_moves_back() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    let (assigned, assign_plan) = assign_then_rollout(dir);
    let later = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    assert!(later.contains(ORDERS_ON_2) && later.contains("stagedMoves:"));
    let before = head(dir);

    let plan = run(
        dir,
        &[
            "revert",
            &assigned,
            "--branch",
            "undo",
            "-o",
            "json",
            "--inventory",
            &inventory(),
        ],
    );

    // The plan is the inverse of the one `assign` printed.
    let forward = moves(&assign_plan);
    assert!(!forward.is_empty(), "{assign_plan}");
    let back: Vec<_> = forward
        .into_iter()
        .map(|(resource, from, to)| (resource, to, from))
        .collect();
    assert_eq!(moves(&plan), back, "{plan}");

    // One commit on a new branch, holding the later edit and the old line.
    assert_eq!(git(dir, &["branch", "--show-current"]), "undo\n");
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    assert_eq!(
        git(dir, &["rev-list", "--count", &format!("{before}..HEAD")]),
        "1\n"
    );
    assert_eq!(git(dir, &["rev-parse", "HEAD~1"]).trim(), before);
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    assert_eq!(text, later.replace(ORDERS_ON_2, ORDERS_ON_1));
    assert_eq!(
        git(dir, &["show", &format!("HEAD:{MANIFEST}")]),
        text,
        "the commit holds the file written"
    );
    // Against the original: only the rollout's lines remain.
    let rollout_only = git(dir, &["diff", "--numstat", "main", "HEAD"]);
    assert_eq!(rollout_only, format!("4\t0\t{MANIFEST}\n"));

    assert_last_commit_message(
        dir,
        &format!(
            "Revert \"Assign Integration shop/orders to operator-2\"\n\nThis reverts commit {assigned}.\n"
        ),
        &[
            "- Integration shop/orders: operator-2 (by pin #1) -> operator-1 (by pin #1)",
            "Written by `kubectl camelk revert`.",
        ],
    );
}

#[test]
fn the_default_branch_is_named_after_the_revert_and_the_table_shows_the_diff() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    let (assigned, _) = assign_then_rollout(dir);
    let stdout = run(dir, &["revert", &assigned]);
    assert!(
        stdout.contains(&format!("-{ORDERS_ON_2}")) && stdout.contains(&format!("+{ORDERS_ON_1}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("Integration   shop        orders   operator-2   operator-1   pin #1"),
        "{stdout}"
    );
    assert_eq!(
        git(dir, &["branch", "--show-current"]),
        "camelk/revert-assign-integration-shop-orders-to-operator-2\n"
    );
}

#[test]
fn revert_pushes_its_branch_with_push() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    let remotes = tempfile::tempdir().unwrap();
    let bare = bare_remote(remotes.path(), "gitops.git", dir);
    git(
        dir,
        &["remote", "add", "origin", &bare.display().to_string()],
    );
    let (assigned, _) = assign_then_rollout(dir);
    camelk(dir)
        .args(["revert", &assigned, "--branch", "undo-orders", "--push"])
        .assert()
        .success()
        .stderr(predicate::str::contains("pushed undo-orders to origin"));
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/undo-orders"]),
        git(dir, &["rev-parse", "HEAD"])
    );
    let pushed = git(
        &bare,
        &["log", "-1", "--format=%s", "refs/heads/undo-orders"],
    );
    assert_eq!(
        pushed,
        "Revert \"Assign Integration shop/orders to operator-2\"\n"
    );
}

#[test]
fn a_later_change_of_the_same_lines_is_a_conflict_that_names_them_and_writes_nothing() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    // Later, the same pin gets a new comment.
    let assigned = assign_then_edit(dir, "reword the pin's comment", |text| {
        text.replace("# keep during the sale", "# until the sale ends")
    });
    refuses_and_writes_nothing(
        dir,
        camelk(dir).args(["revert", &assigned, "--branch", "undo"]),
        &[
            &format!(
                "cannot revert {}: {MANIFEST} was changed since",
                &assigned[..12]
            ),
            &format!("{MANIFEST}: line 22:"),
            "the commit wrote:\n      |       operator: operator-2   # keep during the sale",
            "now:\n      |       operator: operator-2   # until the sale ends",
            "nothing was written",
        ],
    );
    assert!(!git(dir, &["branch", "--list"]).contains("undo"));
}

#[test]
fn dry_run_shows_the_revert_and_writes_nothing() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    let (assigned, _) = assign_then_rollout(dir);
    let before = state(dir);
    camelk(dir)
        .args(["revert", &assigned, "--dry-run", "--push"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("+{ORDERS_ON_1}")))
        .stderr(predicate::str::contains("dry run: nothing written"));
    assert_eq!(state(dir), before);
}

#[test]
fn a_merge_commit_is_reverted_against_its_first_parent() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    run(dir, &[&ASSIGN_ORDERS[..], &["--branch", "assign"]].concat());
    git(dir, &["checkout", "-q", "main"]);
    std::fs::write(dir.join("README"), "gitops repo, reviewed\n").unwrap();
    git(dir, &["commit", "-q", "-am", "readme"]);
    git(
        dir,
        &["merge", "-q", "--no-ff", "-m", "Merge assign", "assign"],
    );
    let merge = head(dir);
    let first_parent = git(dir, &["rev-parse", "HEAD^1"]).trim().to_string();
    run(dir, &["revert", &merge, "--branch", "undo"]);
    assert_eq!(std::fs::read_to_string(dir.join(MANIFEST)).unwrap(), SHOP);
    assert_last_commit_message(
        dir,
        &format!(
            "Revert \"Merge assign\"\n\nThis reverts commit {merge}, reversing changes made to {first_parent}.\n"
        ),
        &[],
    );
}

#[test]
fn a_commit_that_did_not_change_the_manifest_or_does_not_exist_is_refused() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    std::fs::write(dir.join("README"), "gitops repo, reviewed\n").unwrap();
    git(dir, &["commit", "-q", "-am", "readme"]);
    for (rev, says) in [
        (
            "HEAD",
            format!("did not change {MANIFEST}; nothing to revert"),
        ),
        (
            "no-such-rev",
            "revision `no-such-rev` not found".to_string(),
        ),
        // The first commit created the manifest: reverting it would delete it.
        (
            "HEAD~1",
            format!("created {MANIFEST}; reverting it would delete the manifest"),
        ),
    ] {
        refuses_and_writes_nothing(dir, camelk(dir).args(["revert", rev]), &[&says]);
    }
}

#[test]
fn a_revert_whose_result_would_be_invalid_writes_nothing() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    // Later, operator-1 is retired: nothing may name it any more.
    let assigned = assign_then_edit(dir, "retire operator-1", |text| {
        text.replace(
            "    - id: operator-1   # current\n      namespace: camel-k\n",
            "",
        )
        .replace("defaultOperator: operator-1", "defaultOperator: operator-2")
    });
    run(dir, &["validate"]);
    refuses_and_writes_nothing(
        dir,
        camelk(dir).args(["revert", &assigned]),
        &["would be invalid", "operator-1"],
    );
}
