//! The CI integration shipped in ci/: the GitHub workflow and the GitLab
//! template parse, run ci/plan-comment.sh with the variables it reads, and
//! every flag the script passes the plugin is one the plugin accepts. (The
//! script itself runs against a live reconciler in tests/e2e/served_plan.rs.)

use std::path::PathBuf;
use std::process::Command;

fn ci(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ci")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn help(command: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-camelk"))
        .args([command, "--help"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The variables ci/plan-comment.sh reads (`CAMELK_*`).
fn script_variables() -> Vec<String> {
    let script = ci("plan-comment.sh");
    let mut vars: Vec<String> = script
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("CAMELK_"))
        .map(str::to_string)
        .collect();
    vars.sort();
    vars.dedup();
    vars
}

#[test]
fn the_script_passes_only_flags_the_plugin_accepts() {
    let script = ci("plan-comment.sh");
    for line in script.lines().filter(|l| l.contains("kubectl-camelk ")) {
        let command = if line.contains(" validate ") {
            "validate"
        } else if line.contains(" plan ") {
            "plan"
        } else {
            continue;
        };
        let help = help(command);
        for flag in line
            .split_whitespace()
            .filter(|w| w.starts_with("--") && w.len() > 2)
        {
            assert!(help.contains(flag), "`{command}` has no {flag}: {line}");
        }
    }
    // The plan's continuation lines (its flags are on the next lines).
    let plan_help = help("plan");
    for flag in ["--server", "--base", "--head", "--max-bytes", "-f"] {
        assert!(script.contains(flag) && plan_help.contains(flag), "{flag}");
    }
    assert!(help("validate").contains("github"), "validate -o github");
}

#[test]
fn the_github_workflow_runs_the_script_with_what_it_reads() {
    let workflow: serde_json::Value =
        serde_saphyr::from_str(&ci("github/camelk-plan.yml")).unwrap();
    let steps = workflow["jobs"]["plan"]["steps"].as_array().unwrap();
    let plan = steps
        .iter()
        .find(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("ci/plan-comment.sh"))
        })
        .expect("a step runs ci/plan-comment.sh");
    let env = plan["env"].as_object().unwrap();
    for required in [
        "CAMELK_BASE",
        "CAMELK_HEAD",
        "CAMELK_PLAN_SERVER",
        "CAMELK_PLAN_TOKEN",
    ] {
        assert!(env.contains_key(required), "the step sets {required}");
    }
    let known = script_variables();
    for name in env.keys() {
        assert!(known.contains(name), "the script does not read {name}");
    }
    assert_eq!(
        workflow["on"]["pull_request"]["paths"][0],
        "operator-assignment.yaml"
    );
    // The comment step finds the one comment by the plan's marker line.
    assert!(steps.iter().any(|s| {
        s["run"]
            .as_str()
            .is_some_and(|r| r.contains("head -n 1 camelk-plan.md") && r.contains("PATCH"))
    }));
}

#[test]
fn the_gitlab_template_runs_the_script_with_what_it_reads() {
    let template: serde_json::Value =
        serde_saphyr::from_str(&ci("gitlab/camelk-plan.gitlab-ci.yml")).unwrap();
    let job = &template["camelk-plan"];
    assert!(
        job["script"][0]
            .as_str()
            .unwrap()
            .contains("ci/plan-comment.sh")
    );
    let known = script_variables();
    for name in job["variables"].as_object().unwrap().keys() {
        assert!(known.contains(name), "the script does not read {name}");
    }
    assert_eq!(
        job["artifacts"]["reports"]["codequality"],
        "gl-code-quality-report.json"
    );
}
