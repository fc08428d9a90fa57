//! Output made for CI: `validate -o github` (workflow-command annotations),
//! `validate -o gitlab` (a Code Quality report), and `plan -o markdown` as a
//! pull-request comment (marker line, folded long lists, byte limit).

mod common;

use std::path::Path;

use common::{SHOP, camelk, manifest_with_a_warning, repo_with};
use predicates::prelude::*;

/// A manifest with three errors and a warning, one message holding `%`.
fn invalid_manifest() -> String {
    std::fs::read_to_string(common::fixture("malformed/33-percentage-over-100.yaml"))
        .unwrap()
        .replace("      operator: operator-2\n", "      operator: operatr-2\n")
        .replace(
            "  pins:\n",
            "    - name: shadowed\n      match:\n        names: [\"canary-1\"]\n      operator: operator-1\n  pins:\n",
        )
}

/// A repository whose manifest is at `file` (a name a workflow command must
/// escape in its properties).
fn repo_with_file(file: &str, text: &str) -> tempfile::TempDir {
    let repo = repo_with(SHOP);
    std::fs::write(repo.path().join(file), text).unwrap();
    common::git(repo.path(), &["add", "."]);
    common::git(repo.path(), &["commit", "-q", "-m", "manifest"]);
    repo
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn validate_as_github_annotations() {
    let repo = repo_with_file("ci:ops,a.yaml", &invalid_manifest());
    let output = camelk(repo.path())
        .args(["validate", "-f", "ci:ops,a.yaml", "-o", "github"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "errors fail the job");
    let annotations = stdout(&output);
    // One workflow command per finding, nothing else on stdout.
    assert!(
        annotations.lines().all(|l| l.starts_with("::")),
        "{annotations}"
    );
    insta::assert_snapshot!(annotations);
    // The log still has the findings as people read them.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ci:ops,a.yaml:31:20: error: rollout step `150%` is over 100%"));
    assert!(stderr.contains("3 errors in ci:ops,a.yaml"));
}

#[test]
fn validate_as_github_annotations_of_a_valid_manifest_with_a_warning() {
    let repo = repo_with(&manifest_with_a_warning());
    camelk(repo.path())
        .args(["validate", "-o", "github"])
        .assert()
        .success()
        .stdout(
            "::warning file=operator-assignment.yaml,line=18,col=7::this rule can never match: \
             spec.rules[0] matches every resource it matches, and comes first\n",
        )
        .stderr(predicate::str::contains(
            "operator-assignment.yaml is valid",
        ));
}

#[test]
fn validate_of_a_manifest_with_no_findings_is_an_empty_report_in_each_ci_format() {
    let repo = repo_with(SHOP);
    for (format, empty) in [("github", ""), ("gitlab", "[]\n")] {
        camelk(repo.path())
            .args(["validate", "-o", format])
            .assert()
            .success()
            .stdout(empty);
    }
}

#[test]
fn validate_as_gitlab_code_quality() {
    let repo = repo_with_file("ci:ops,a.yaml", &invalid_manifest());
    let run = || {
        camelk(repo.path())
            .args(["validate", "-f", "ci:ops,a.yaml", "-o", "gitlab"])
            .output()
            .unwrap()
    };
    let output = run();
    assert_eq!(output.status.code(), Some(1), "errors fail the job");
    let report = stdout(&output);
    let issues: Vec<serde_json::Value> = serde_json::from_str(&report).unwrap();
    assert_eq!(issues.len(), 4);
    let severities: Vec<&str> = issues
        .iter()
        .map(|i| i["severity"].as_str().unwrap())
        .collect();
    assert_eq!(severities, ["major", "minor", "major", "major"]);
    // Fingerprints: unique in the report (the same message on two lines
    // gives two), and the same on the next run.
    let fingerprints: std::collections::BTreeSet<&str> = issues
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(fingerprints.len(), issues.len());
    assert!(fingerprints.iter().all(|f| f.len() == 64));
    assert_eq!(stdout(&run()), report);
    insta::assert_snapshot!(report);
}

#[test]
fn validate_as_gitlab_code_quality_of_a_valid_manifest() {
    let repo = repo_with(&manifest_with_a_warning());
    let output = camelk(repo.path())
        .args(["validate", "-o", "gitlab"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let issues: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(issues[0]["severity"], "minor");
    assert_eq!(issues[0]["location"]["path"], "operator-assignment.yaml");
    assert_eq!(issues[0]["location"]["lines"]["begin"], 18);
}

#[test]
fn plan_refuses_the_formats_of_validate() {
    let repo = repo_with(SHOP);
    let inventory = common::fixture("inventory.json");
    for format in ["github", "gitlab"] {
        camelk(repo.path())
            .args(["plan", "--inventory"])
            .arg(&inventory)
            .args(["-o", format])
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "-o {format} is for `validate`; `plan` prints table, markdown, json, yaml"
            )));
    }
}

/// An inventory (a `kubectl get -o json` List) of `moves` Integrations
/// `canary-NNN` owned by operator-1 (the rule `canary` moves them to
/// operator-2) and `first` Pipes `events-NNN` that no operator owns yet.
fn write_inventory(dir: &Path, moves: usize, first: usize) -> std::path::PathBuf {
    let owned = |kind: &str, name: String, owner: Option<&str>| {
        let mut metadata = serde_json::json!({ "name": name, "namespace": "shop" });
        if let Some(owner) = owner {
            metadata["labels"] = serde_json::json!({ "camel.apache.org/operator.id": owner });
            metadata["annotations"] = serde_json::json!({ "camel.apache.org/operator.id": owner });
        }
        serde_json::json!({
            "apiVersion": "camel.apache.org/v1",
            "kind": kind,
            "metadata": metadata,
            "spec": {},
            "status": { "phase": "Running" },
        })
    };
    let items: Vec<serde_json::Value> = (0..moves)
        .map(|i| owned("Integration", format!("canary-{i:03}"), Some("operator-1")))
        .chain((0..first).map(|i| owned("Pipe", format!("events-{i:03}"), None)))
        .collect();
    let path = dir.join("inventory.json");
    let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
    std::fs::write(&path, serde_json::to_string_pretty(&list).unwrap()).unwrap();
    path
}

/// `plan -o markdown` against an inventory of `moves` and `first` rows.
fn markdown(moves: usize, first: usize, args: &[&str]) -> std::process::Output {
    let repo = repo_with(SHOP);
    let inventory_dir = tempfile::tempdir().unwrap();
    let inventory = write_inventory(inventory_dir.path(), moves, first);
    camelk(repo.path())
        .args(["plan", "-o", "markdown", "--inventory"])
        .arg(inventory)
        .args(args)
        .output()
        .unwrap()
}

/// Rows shown under each `#### ` heading: table rows (header and rule not
/// counted) and the list items of the notes.
fn rows_per_section(markdown: &str) -> Vec<(String, usize)> {
    let mut sections: Vec<(String, usize)> = Vec::new();
    for line in markdown.lines() {
        if let Some(title) = line.strip_prefix("#### ") {
            sections.push((title.to_string(), 0));
        } else if (line.starts_with("| ") || line.starts_with("- "))
            && !line.starts_with("| BATCH |")
            && !line.starts_with("| KIND |")
            && let Some(last) = sections.last_mut()
        {
            last.1 += 1;
        }
    }
    sections
}

#[test]
fn plan_markdown_starts_with_a_marker_naming_the_assignment() {
    let output = markdown(2, 1, &[]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert_eq!(
        text.lines().next(),
        Some("<!-- kubectl-camelk:plan shop -->")
    );
    assert_eq!(text.matches("kubectl-camelk:plan").count(), 1);
    assert!(!text.contains("<details>"), "short lists are not folded");

    let namespaced = SHOP.replace("  name: shop\n", "  name: shop\n  namespace: gitops\n");
    let repo = repo_with(&namespaced);
    camelk(repo.path())
        .args(["plan", "-o", "markdown", "--inventory"])
        .arg(common::fixture("inventory.json"))
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "<!-- kubectl-camelk:plan gitops/shop -->\n### Planned migration\n",
        ));
}

#[test]
fn plan_markdown_folds_sections_over_twenty_rows() {
    let output = markdown(21, 20, &[]);
    assert!(output.status.success());
    let text = stdout(&output);
    // 21 moves are folded; 20 first assignments are not.
    assert_eq!(text.matches("<details>").count(), 1);
    assert!(text.contains("<details><summary>21 moves</summary>\n\n| BATCH |"));
    assert_eq!(
        rows_per_section(&text),
        [
            ("Moves".to_string(), 21),
            ("First assignments".to_string(), 20),
            // The pin of shop/orders, which the inventory does not hold.
            ("Notes".to_string(), 1)
        ]
    );
    assert!(!text.contains("left out"));
    insta::assert_snapshot!(text);
}

#[test]
fn plan_markdown_is_cut_at_max_bytes_with_a_note_that_counts_what_is_left_out() {
    let output = markdown(60, 30, &["--max-bytes", "3000", "-n", "shop"]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.len() <= 3000, "{} bytes", text.len());
    let shown = rows_per_section(&text);
    assert_eq!(shown.len(), 1, "only moves fit: {shown:?}");
    let moves_shown = shown[0].1;
    assert!(moves_shown > 0 && moves_shown < 60);
    let note = text.lines().last().unwrap();
    assert_eq!(
        note,
        format!(
            "**{} rows left out** to stay within 3000 bytes ({} moves, 30 first assignments, \
             1 note): `kubectl camelk plan -n shop -o json` shows them all.",
            60 - moves_shown + 30 + 1,
            60 - moves_shown
        )
    );
    // The folded section is closed before the note.
    assert!(text.contains("\n</details>\n\n**"));
    insta::assert_snapshot!(text);
}

#[test]
fn plan_markdown_never_exceeds_max_bytes_and_counts_every_row() {
    let full = stdout(&markdown(45, 25, &["--max-bytes", "0"]));
    assert!(!full.contains("left out"));
    assert_eq!(
        rows_per_section(&full),
        [
            ("Moves".to_string(), 45),
            ("First assignments".to_string(), 25),
            ("Notes".to_string(), 1)
        ]
    );
    assert_eq!(
        stdout(&markdown(45, 25, &[])),
        full,
        "60000 bytes is plenty here"
    );
    for max in [
        900,
        1200,
        2500,
        4000,
        5000,
        6000,
        full.len() - 1,
        full.len(),
    ] {
        let output = markdown(45, 25, &["--max-bytes", &max.to_string()]);
        assert!(output.status.success(), "{max}");
        let text = stdout(&output);
        assert!(text.len() <= max, "{max}: {} bytes", text.len());
        if max >= full.len() {
            assert_eq!(text, full);
            continue;
        }
        let shown = rows_per_section(&text);
        let count = |title: &str| {
            shown
                .iter()
                .find(|(t, _)| t == title)
                .map_or(0, |(_, n)| *n)
        };
        let (moves_left, first_left, notes_left) = (
            45 - count("Moves"),
            25 - count("First assignments"),
            1 - count("Notes"),
        );
        let mut parts = Vec::new();
        if moves_left > 0 {
            parts.push(format!(
                "{moves_left} move{}",
                if moves_left == 1 { "" } else { "s" }
            ));
        }
        if first_left > 0 {
            parts.push(format!(
                "{first_left} first assignment{}",
                if first_left == 1 { "" } else { "s" }
            ));
        }
        if notes_left > 0 {
            parts.push("1 note".to_string());
        }
        let left = moves_left + first_left + notes_left;
        assert_eq!(
            text.lines().last().unwrap(),
            format!(
                "**{left} row{} left out** to stay within {max} bytes ({}): \
                 `kubectl camelk plan -o json` shows them all.",
                if left == 1 { "" } else { "s" },
                parts.join(", ")
            ),
            "{max}"
        );
        // Rows are kept in order: nothing of a later section before an
        // earlier one is complete.
        if count("First assignments") > 0 {
            assert_eq!(count("Moves"), 45, "{max}");
        }
    }
}

#[test]
fn plan_markdown_refuses_a_limit_below_its_heading() {
    let output = markdown(45, 25, &["--max-bytes", "100"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--max-bytes 100 is too small"), "{stderr}");
}
