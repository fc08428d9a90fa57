//! End-to-end tests of the plugin's commands on real Git repositories.

mod common;

use common::{
    ASSIGN_ORDERS, MANIFEST, SHOP, assert_last_commit_message, camelk, git,
    manifest_with_a_warning, refuses_and_writes_nothing, repo_with, state, words,
};
use predicates::prelude::*;

fn inventory() -> String {
    common::fixture("inventory.json").display().to_string()
}

#[test]
fn usage_says_kubectl_camelk() {
    let repo = repo_with(SHOP);
    for (args, usage) in [
        (&["--help"][..], "Usage: kubectl camelk [OPTIONS] <COMMAND>"),
        (&["assign", "--help"][..], "Usage: kubectl camelk assign"),
    ] {
        camelk(repo.path())
            .args(args)
            .assert()
            .success()
            .stdout(predicate::str::contains(usage));
    }
}

#[test]
fn completion_scripts_for_each_shell() {
    let repo = repo_with(SHOP);
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kubectl-camelk"),
        ("fish", "complete -c kubectl-camelk"),
    ] {
        camelk(repo.path())
            .args(["completion", shell])
            .assert()
            .success()
            .stdout(
                predicate::str::contains(marker)
                    .and(predicate::str::contains("rollout"))
                    .and(predicate::str::contains("revert")),
            );
    }
}

#[test]
fn init_writes_a_valid_commented_manifest_on_a_branch() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["config", "user.name", "Test User"]);
    git(dir.path(), &["config", "user.email", "test@example.com"]);
    camelk(dir.path())
        .args(words(
            "init --name shop --operator operator-1=camel-k --operator operator-2=camel-k-next",
        ))
        .assert()
        .success();
    let text = std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap();
    assert!(text.contains("# Ordered rules: the first rule that matches"));
    // Every comment inside `spec` sits at the indentation of what it explains.
    let misplaced: Vec<&str> = text
        .lines()
        .skip_while(|line| *line != "spec:")
        .skip(1)
        .filter(|line| !line.is_empty() && !line.starts_with("  "))
        .collect();
    assert!(misplaced.is_empty(), "{misplaced:?}");
    camelk(dir.path()).arg("validate").assert().success();
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    let branch = git(dir.path(), &["branch", "--show-current"]);
    assert!(branch.starts_with("camelk/"), "{branch}");
    // A second init refuses to overwrite.
    camelk(dir.path())
        .args(["init", "--branch", "again"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("already exists"));
}

#[test]
fn init_refuses_flags_that_would_make_an_invalid_manifest() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    for (args, message) in [
        (
            &["--operator", "a=camel-k", "--default", "b"][..],
            "--default `b` is not one of the operators given with --operator (a)",
        ),
        (
            &["--operator", "a=Camel_K"][..],
            "`Camel_K` is not a valid namespace name",
        ),
        (
            &["--name", "Shop Floor"][..],
            "--name `Shop Floor` is not a valid name",
        ),
    ] {
        camelk(dir.path())
            .arg("init")
            .args(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(message));
    }
    assert!(!dir.path().join(MANIFEST).exists());
}

#[test]
fn assign_commits_only_the_changed_lines_on_a_new_branch() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    camelk(dir)
        .args(ASSIGN_ORDERS)
        .args(["--branch", "move-orders"])
        .assert()
        .success()
        // The diff of the one line, and the plan's row.
        .stdout(
            predicate::str::contains("-      operator: operator-1   # keep during the sale")
                .and(predicate::str::contains(
                    "+      operator: operator-2   # keep during the sale",
                ))
                .and(predicate::str::contains(
                    "Integration   shop        orders   operator-1   operator-2   pin #1",
                )),
        );
    assert_eq!(git(dir, &["branch", "--show-current"]), "move-orders\n");
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    let numstat = git(dir, &["diff", "--numstat", "main", "move-orders"]);
    assert_eq!(numstat, format!("1\t1\t{MANIFEST}\n"));
    assert_last_commit_message(
        dir,
        "Assign Integration shop/orders to operator-2\n",
        &["- Integration shop/orders: operator-1 -> operator-2"],
    );
}

#[test]
fn unassign_and_rollout_commit_what_they_say() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    camelk(dir)
        .args(["unassign", "it/orders", "-n", "shop"])
        .assert()
        .success();
    assert_last_commit_message(
        dir,
        "",
        &["Integration shop/orders: unpinned from operator-1, now operator-1 (by default)"],
    );
    assert_eq!(
        git(dir, &["diff", "--numstat", "main", "HEAD"]),
        format!("1\t5\t{MANIFEST}\n"),
        "the last pin leaves `pins: []`"
    );

    camelk(dir)
        .args(words(
            "rollout --from operator-1 --to operator-2 --steps 10%,50%,100% -l tier=gold",
        ))
        .assert()
        .success();
    assert_last_commit_message(
        dir,
        "Roll out operator-1 -> operator-2\n",
        &[
            "staged move operator-1 -> operator-2 of resources matching `tier=gold` in steps 10%, 50%, 100%",
        ],
    );
    camelk(dir).arg("validate").assert().success();
}

/// With no kubeconfig an edit still works, and its plan says which
/// resources it could not see, why, and the flags that fix it (with a
/// cluster, it plans against it: `e2e/live.rs`).
#[test]
fn an_edit_without_a_cluster_says_what_its_plan_could_not_see() {
    let repo = repo_with(SHOP);
    let output = camelk(repo.path())
        .args(["rollout", "--from", "operator-1", "--to", "operator-2"])
        .args(["--steps", "50%", "--dry-run"])
        .output()
        .unwrap();
    camelk_testkit::assert_success(&output, "rollout --dry-run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("\nPlan: 0 moves in 0 batches"), "{stdout}");
    assert!(
        stdout.contains(
            "\nNotes\n- the cluster was not read: no kubeconfig ($KUBECONFIG is unset and there \
             is no ~/.kube/config); not seen: every Camel K resource in every namespace, so this \
             plan shows no resource; to plan against a cluster, pass --kubeconfig FILE (or set \
             $KUBECONFIG) and --context NAME; or give --inventory FILE\n"
        ),
        "{stdout}"
    );

    // As JSON the note is the plan's, and -n narrows what was not seen.
    let output = camelk(repo.path())
        .env("KUBECONFIG", repo.path().join("missing-config"))
        .args(["assign", "pipe/events", "--to", "operator-2", "-n", "shop"])
        .args(["--dry-run", "-o", "json"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(plan["batches"][0]["moves"][0]["resource"]["name"], "events");
    let notes = plan["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{plan:#}");
    let note = notes[0].as_str().unwrap();
    for said in [
        "no kubeconfig (none of the files in $KUBECONFIG exists)",
        "not seen: every Camel K resource in namespace shop",
        "this plan shows only the resource named on the command line",
    ] {
        assert!(note.contains(said), "{said:?} in {note}");
    }
}

#[test]
fn dry_run_writes_nothing() {
    let repo = repo_with(SHOP);
    let before = state(repo.path());
    camelk(repo.path())
        .args(words(
            "assign pipe/events --to operator-2 -n shop --dry-run --push",
        ))
        .assert()
        .success()
        .stdout(predicate::str::contains("+    - kind: Pipe"))
        .stderr(predicate::str::contains("dry run: nothing written"));
    assert_eq!(state(repo.path()), before);
}

#[test]
fn a_dirty_work_tree_is_refused_unless_allowed() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    std::fs::write(dir.join("README"), "local edit\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "untracked\n").unwrap();
    refuses_and_writes_nothing(
        dir,
        camelk(dir).args(ASSIGN_ORDERS),
        &["uncommitted changes (README, notes.txt)", "--allow-dirty"],
    );

    camelk(dir)
        .args(ASSIGN_ORDERS)
        .args(["--allow-dirty"])
        .assert()
        .success();
    // Only the manifest was committed; the other changes are still there, uncommitted.
    assert_eq!(
        git(dir, &["show", "--name-only", "--format=", "HEAD"]),
        format!("{MANIFEST}\n")
    );
    assert_eq!(
        git(dir, &["status", "--porcelain"]),
        " M README\n?? notes.txt\n"
    );

    // The manifest's own uncommitted lines would ride along in the commit:
    // --allow-dirty does not cover them.
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    std::fs::write(dir.join(MANIFEST), text.replace("50%", "25%")).unwrap();
    refuses_and_writes_nothing(
        dir,
        camelk(dir)
            .args(words("assign integration/refunds --to operator-2 -n shop"))
            .args(["--allow-dirty"]),
        &[&format!(
            "{MANIFEST} has uncommitted changes, which this commit would include"
        )],
    );
}

#[test]
fn the_namespace_comes_from_the_kubeconfig_and_a_missing_context_is_an_error() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    let config = tempfile::tempdir().unwrap();
    let kubeconfig = config.path().join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {}}]\n\
         contexts: [{name: team, context: {cluster: c, user: u, namespace: team-a}}]\n\
         current-context: team\n",
    )
    .unwrap();
    let assign = [
        "assign",
        "integration/orders",
        "--to",
        "operator-2",
        "--dry-run",
    ];
    // No kubeconfig at all: `default`, as kubectl does.
    camelk(dir)
        .args(assign)
        .assert()
        .success()
        .stdout(predicate::str::contains("+      namespace: default"));
    camelk(dir)
        .args(assign)
        .env("KUBECONFIG", &kubeconfig)
        .assert()
        .success()
        .stdout(predicate::str::contains("+      namespace: team-a"));
    // A context that does not exist is not silently `default`.
    refuses_and_writes_nothing(
        dir,
        camelk(dir)
            .args(&assign[..4])
            .args(["--context", "typo"])
            .env("KUBECONFIG", &kubeconfig),
        &["typo", "pass -n"],
    );
}

#[test]
fn an_edit_that_would_be_invalid_is_reported_once() {
    let repo = repo_with(&SHOP.replace(
        "  defaultOperator: operator-1\n",
        "  scope:\n    kinds: [Integration]\n  defaultOperator: operator-1\n",
    ));
    let before = state(repo.path());
    let output = camelk(repo.path())
        .args(["assign", "build/kit-1", "--to", "operator-2", "-n", "shop"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert_eq!(stderr.matches("pin to kind `Build`").count(), 1, "{stderr}");
    assert_eq!(state(repo.path()), before);
}

#[test]
fn an_existing_branch_is_never_overwritten() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    git(dir, &["branch", "taken"]);
    refuses_and_writes_nothing(
        dir,
        camelk(dir).args(ASSIGN_ORDERS).args(["--branch", "taken"]),
        &["branch `taken` already exists"],
    );
}

#[test]
fn assigning_to_an_unknown_operator_suggests_the_closest() {
    let repo = repo_with(SHOP);
    for (line, says) in [
        (
            "assign integration/orders --to operater-2 -n shop",
            "unknown operator `operater-2`; did you mean `operator-2`?",
        ),
        (
            "assign integraton/orders --to operator-2 -n shop",
            "did you mean `Integration`?",
        ),
    ] {
        refuses_and_writes_nothing(repo.path(), camelk(repo.path()).args(words(line)), &[says]);
    }
}

#[test]
fn plan_prints_moves_first_assignments_blocked_and_errors() {
    let repo = repo_with(SHOP);
    let assert = camelk(repo.path())
        .args(["plan", "--inventory", &inventory()])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    insta::assert_snapshot!(stdout);
}

#[test]
fn plan_as_markdown_and_json() {
    let repo = repo_with(SHOP);
    let markdown = camelk(repo.path())
        .args(["plan", "--inventory", &inventory(), "-o", "markdown"])
        .assert()
        .success();
    insta::assert_snapshot!(String::from_utf8_lossy(&markdown.get_output().stdout).into_owned());
    let json = camelk(repo.path())
        .args(["plan", "--inventory", &inventory(), "-o", "json"])
        .assert()
        .success();
    let value: serde_json::Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    assert_eq!(
        value["batches"][0]["moves"][0]["resource"]["name"],
        "canary-a"
    );
    assert_eq!(value["blocked"][0]["why"]["phase"], "Building Kit");
    assert_eq!(value["firstAssignments"][0]["resource"]["kind"], "Pipe");
    assert_eq!(value["unchanged"]["total"], 3);
}

/// `plan --inventory` with `args` in `dir`, which must succeed: its stdout and stderr.
fn plan_inventory(dir: &std::path::Path, args: &[&str]) -> (String, String) {
    let output = camelk(dir)
        .args(["plan", "--inventory", &inventory()])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (String::from_utf8(output.stdout).unwrap(), stderr)
}

/// The same as JSON, parsed, and its stderr.
fn plan_inventory_json(dir: &std::path::Path, args: &[&str]) -> (serde_json::Value, String) {
    let (stdout, stderr) = plan_inventory(dir, &[&["-o", "json"], args].concat());
    (serde_json::from_str(&stdout).unwrap(), stderr)
}

#[test]
fn plan_as_yaml_is_the_json_document() {
    let repo = repo_with(SHOP);
    let json = plan_inventory_json(repo.path(), &[]).0;
    let yaml: serde_json::Value =
        serde_saphyr::from_str(&plan_inventory(repo.path(), &["-o", "yaml"]).0).unwrap();
    assert_eq!(yaml, json);
}

#[test]
fn plan_with_a_namespace_shows_only_that_namespace() {
    let repo = repo_with(SHOP);
    let plan = |namespace: &[&str]| plan_inventory_json(repo.path(), namespace).0;
    let everything = plan(&[]);
    assert_ne!(everything["batches"], serde_json::json!([]));
    assert_eq!(plan(&["-n", "shop"]), everything);
    let elsewhere = plan(&["-n", "web"]);
    assert_eq!(elsewhere["batches"], serde_json::json!([]));
    assert_eq!(elsewhere["firstAssignments"], serde_json::json!([]));
    assert_eq!(elsewhere["unchanged"]["total"], 0);
}

#[test]
fn a_pull_request_that_adds_the_manifest_plans_against_the_owners_now() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    git(dir, &["rm", "-q", MANIFEST]);
    git(dir, &["commit", "-q", "-m", "no manifest yet"]);
    git(dir, &["revert", "--no-edit", "HEAD"]);
    let (pull_request, stderr) = plan_inventory_json(dir, &["--base", "HEAD~1", "--head", "HEAD"]);
    assert!(
        stderr.contains(&format!(
            "note: {MANIFEST} does not exist at revision `HEAD~1`; planning against the owners the resources carry now"
        )),
        "{stderr}"
    );
    assert_eq!(pull_request, plan_inventory_json(dir, &[]).0);
}

#[test]
fn plan_between_two_revisions() {
    let repo = repo_with(SHOP);
    let dir = repo.path();
    camelk(dir)
        .args(words(
            "assign integration/payments --to operator-2 -n shop --branch pr",
        ))
        .assert()
        .success();
    let assert = camelk(dir)
        .args(words("plan --base main --head pr -o json"))
        .args(["--inventory", &inventory()])
        .assert()
        .success();
    let value: serde_json::Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let moves = value["batches"][0]["moves"].as_array().unwrap();
    assert_eq!(moves.len(), 1, "{value:#}");
    assert_eq!(moves[0]["resource"]["name"], "payments");
    assert_eq!(moves[0]["from"], "operator-1");
    assert_eq!(moves[0]["to"], "operator-2");
    // The same revision twice: nothing changes, so diff exits 0; a change
    // exits 1, a revision that does not exist 2.
    for (base, code, says) in [
        ("pr", 0, ""),
        ("main", 1, ""),
        ("no-such-rev", 2, "revision `no-such-rev` not found"),
    ] {
        camelk(dir)
            .args(["diff", "--base", base, "--head", "pr"])
            .args(["--inventory", &inventory()])
            .assert()
            .code(code)
            .stderr(predicate::str::contains(says));
    }
}

#[test]
fn diff_exit_codes_follow_kubectl_diff() {
    let repo = repo_with(SHOP);
    camelk(repo.path())
        .args(["diff", "--inventory", &inventory()])
        .assert()
        .code(1);
    let quiet = r#"{"items":[{"kind":"Integration","metadata":{"name":"orders","namespace":"shop","labels":{"camel.apache.org/operator.id":"operator-1"}}}]}"#;
    std::fs::write(repo.path().join("quiet.json"), quiet).unwrap();
    camelk(repo.path())
        .args(["diff", "--inventory", "quiet.json"])
        .assert()
        .code(0);
    camelk(repo.path())
        .args(["diff", "--inventory", "missing.json"])
        .assert()
        .code(2);
}

#[test]
fn no_colour_when_not_a_terminal_or_with_no_color() {
    let repo = repo_with(SHOP);
    let assert = camelk(repo.path())
        .args(["plan", "--inventory", &inventory()])
        .env_remove("NO_COLOR")
        .assert()
        .success();
    assert!(!String::from_utf8_lossy(&assert.get_output().stdout).contains('\u{1b}'));
}

#[test]
fn validate_reports_warnings_and_json() {
    let repo = repo_with(&manifest_with_a_warning());
    camelk(repo.path())
        .arg("validate")
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "operator-assignment.yaml:18:7: warning: this rule can never match: spec.rules[0] matches every resource it matches, and comes first",
        ));
    let assert = camelk(repo.path())
        .args(["validate", "-o", "json"])
        .assert()
        .success();
    let value: serde_json::Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(value["valid"], true);
    assert_eq!(value["diagnostics"][0]["line"], 18);
}

#[test]
fn a_missing_manifest_points_to_init() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    camelk(dir.path())
        .args(ASSIGN_ORDERS)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("cannot read operator-assignment.yaml")
                .and(predicate::str::contains("kubectl camelk init")),
        );
}
