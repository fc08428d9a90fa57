//! The CI integration shipped in ci/ and the release workflow in .github/:
//!
//! - the GitHub workflow and the GitLab template parse, run ci/plan-comment.sh
//!   with the variables it reads, and every flag the script passes the plugin
//!   is one the plugin accepts (the script runs against a live reconciler in
//!   tests/e2e/served_plan.rs);
//! - they hold credentials safely: the script comes from the base branch or
//!   the pinned release, never from the pull request; the head is data, read
//!   from Git (shown here by running the script on a head whose manifest is
//!   invalid, or a symlink to a file outside the repository);
//! - they have the history `plan --base` needs, and check the sha256 of what
//!   they download;
//! - every action of every workflow is pinned by commit SHA, and the release
//!   workflow makes its archives with scripts/dist/package.sh for the four
//!   platforms krew-manifest.yaml lists;
//! - krew's shortDescription fits the 50 characters krew shows.
//!
//! `make lint` runs actionlint on the GitHub files; the GitLab template's
//! shell is checked here with shellcheck.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The platforms the release builds: Rust target triple, krew os/arch.
const PLATFORMS: [(&str, &str, &str); 4] = [
    ("x86_64-unknown-linux-gnu", "linux", "amd64"),
    ("aarch64-unknown-linux-gnu", "linux", "arm64"),
    ("x86_64-apple-darwin", "darwin", "amd64"),
    ("aarch64-apple-darwin", "darwin", "arm64"),
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    let file = repo_root().join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn ci(path: &str) -> String {
    read(&format!("ci/{path}"))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
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

fn steps(job: &Value) -> &Vec<Value> {
    job["steps"].as_array().expect("a job with steps")
}

fn run_of(step: &Value) -> &str {
    step["run"].as_str().unwrap_or("")
}

/// The one step whose `run` contains `needle`.
fn step_running<'a>(job: &'a Value, needle: &str) -> &'a Value {
    let found: Vec<&Value> = steps(job)
        .iter()
        .filter(|s| run_of(s).contains(needle))
        .collect();
    assert_eq!(found.len(), 1, "one step runs {needle:?}");
    found[0]
}

/// Byte offset of `needle` in `text`, which must contain it.
fn position(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in:\n{text}"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn is_commit_sha(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
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
fn the_github_workflow_runs_the_base_branch_script_with_the_head_as_data() {
    let workflow = yaml("ci/github/camelk-plan.yml");
    // Secrets and a token that may comment, for pull requests from forks too:
    // so nothing of the head may run.
    assert_eq!(
        workflow["on"]["pull_request_target"]["paths"][0],
        "operator-assignment.yaml"
    );
    assert!(workflow["on"].get("pull_request").is_none());
    let job = &workflow["jobs"]["plan"];

    let checkouts: Vec<&Value> = steps(job)
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout@"))
        })
        .collect();
    assert_eq!(checkouts.len(), 1, "one checkout");
    let checkout = &checkouts[0]["with"];
    assert_eq!(
        checkout["ref"], "${{ github.event.pull_request.base.sha }}",
        "the base is checked out"
    );
    assert_eq!(
        checkout["fetch-depth"], 0,
        "the whole history: `plan --base` reads the base's manifest"
    );
    let fetch = step_running(job, "git fetch");
    assert!(
        run_of(fetch).contains("refs/pull/$PR/head:"),
        "the head is fetched into a ref, not checked out: {fetch:#}"
    );
    for step in steps(job) {
        let run = run_of(step);
        assert!(
            !run.contains("checkout") && !run.contains("git switch"),
            "no step checks out the head: {run}"
        );
    }

    let plan = step_running(job, "ci/plan-comment.sh");
    assert_eq!(run_of(plan), "bash ci/plan-comment.sh", "the base's copy");
    let env = plan["env"].as_object().unwrap();
    for required in [
        "CAMELK_BASE",
        "CAMELK_HEAD",
        "CAMELK_PLAN_SERVER",
        "CAMELK_PLAN_TOKEN",
    ] {
        assert!(env.contains_key(required), "the step sets {required}");
    }
    assert_eq!(
        env["CAMELK_HEAD"],
        "${{ github.event.pull_request.head.sha }}"
    );
    let known = script_variables();
    for name in env.keys() {
        assert!(known.contains(name), "the script does not read {name}");
    }

    // The plugin: a pinned release, checked before it is unpacked or run.
    assert_eq!(workflow["env"]["KUBECTL_CAMELK_VERSION"], VERSION);
    assert!(workflow["env"].get("KUBECTL_CAMELK_SHA256").is_some());
    let install = run_of(step_running(job, "releases/download"));
    assert!(install.contains("${KUBECTL_CAMELK_SHA256:?"), "{install}");
    let check = position(install, "sha256sum --check --strict");
    assert!(install.contains("\"$KUBECTL_CAMELK_SHA256  $RUNNER_TEMP/$archive\""));
    assert!(
        check < position(install, "tar -xzf"),
        "checked before unpacked"
    );

    // The comment step finds the one comment by the plan's marker line.
    let comment = run_of(step_running(job, "head -n 1 camelk-plan.md"));
    assert!(comment.contains("PATCH") && comment.contains("--arg marker"));
}

#[test]
fn the_gitlab_template_runs_the_released_script_with_what_it_reads() {
    let template = yaml("ci/gitlab/camelk-plan.gitlab-ci.yml");
    let job = &template["camelk-plan"];
    let variables = job["variables"].as_object().unwrap();
    assert_eq!(
        variables["GIT_DEPTH"], "0",
        "the whole history: `plan --base` reads the base's manifest"
    );
    let known = script_variables();
    for name in variables.keys().filter(|n| n.starts_with("CAMELK_")) {
        assert!(known.contains(name), "the script does not read {name}");
    }
    assert_eq!(variables["KUBECTL_CAMELK_VERSION"], VERSION);
    // Included from another project, the template brings no file along: the
    // job runs the release's copy of the script, pinned here by sha256.
    assert_eq!(
        variables["PLAN_COMMENT_SHA256"].as_str().unwrap(),
        sha256_hex(read("ci/plan-comment.sh").as_bytes()),
        "PLAN_COMMENT_SHA256 is the sha256 of ci/plan-comment.sh"
    );
    let lines = |key: &str| -> Vec<String> {
        job[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    };
    let before = lines("before_script").join("\n");
    let script = lines("script").join("\n");
    assert!(before.contains("\"$release/plan-comment.sh\""), "{before}");
    assert!(before.contains("${KUBECTL_CAMELK_SHA256:?"), "{before}");
    let check = position(&before, "sha256sum --check --strict");
    assert!(before.contains("\"$KUBECTL_CAMELK_SHA256\" \"/tmp/$archive\""));
    assert!(before.contains("\"$PLAN_COMMENT_SHA256\" /tmp/plan-comment.sh"));
    assert!(
        check < position(&before, "tar -xzf"),
        "checked before unpacked"
    );
    assert!(script.contains("bash /tmp/plan-comment.sh"), "{script}");
    assert!(
        !format!("{before}\n{script}").contains("ci/plan-comment.sh"),
        "nothing runs from the merge request's branch"
    );
    assert_eq!(
        job["artifacts"]["reports"]["codequality"],
        "gl-code-quality-report.json"
    );

    // Its shell, as the runner runs it: before_script and script in one
    // shell, after_script in another.
    let after = lines("after_script").join("\n");
    for (name, body) in [("script", format!("{before}\n{script}")), ("after", after)] {
        let file = tempfile::Builder::new().suffix(".sh").tempfile().unwrap();
        std::fs::write(file.path(), format!("#!/usr/bin/env bash\n{body}\n")).unwrap();
        let out = Command::new("shellcheck")
            .arg(file.path())
            .output()
            .expect("shellcheck (Debian package shellcheck; .ci/run installs it)");
        assert!(
            out.status.success(),
            "the template's {name} lines:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Every `uses:` of every GitHub workflow and template is `owner/repo@SHA`,
/// with the tag it was in a comment beside it.
#[test]
fn every_action_is_pinned_by_commit_sha() {
    let mut files: Vec<String> = vec!["ci/github/camelk-plan.yml".into()];
    for entry in std::fs::read_dir(repo_root().join(".github/workflows")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        files.push(format!(".github/workflows/{name}"));
    }
    assert!(files.iter().any(|f| f.ends_with("release.yml")));
    let mut pinned = 0;
    for file in &files {
        let text = read(file);
        for line in text.lines() {
            let Some(rest) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses:")
            else {
                continue;
            };
            let (action, comment) = rest.split_once('#').unwrap_or((rest, ""));
            let (name, sha) = action
                .trim()
                .split_once('@')
                .unwrap_or_else(|| panic!("{file}: {line}"));
            assert!(
                name.contains('/') && is_commit_sha(sha),
                "{file}: {line}: not pinned by a full commit SHA"
            );
            assert!(
                comment.trim().starts_with('v'),
                "{file}: {line}: say the tag it was"
            );
            pinned += 1;
        }
    }
    assert!(pinned >= 10, "{pinned} pinned actions");
}

#[test]
fn the_release_workflow_packs_every_platform_with_the_dist_script() {
    let workflow = yaml(".github/workflows/release.yml");
    assert_eq!(workflow["on"]["push"]["tags"][0], "v*");
    let jobs = &workflow["jobs"];

    let matrix = jobs["binaries"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap();
    let built: Vec<&str> = matrix
        .iter()
        .map(|m| m["target"].as_str().unwrap())
        .collect();
    assert_eq!(built, PLATFORMS.map(|(target, _, _)| target));
    let build = step_running(&jobs["binaries"], "package.sh");
    assert_eq!(run_of(build), "bash scripts/dist/package.sh build");
    assert_eq!(build["env"]["DIST_TARGETS"], "${{ matrix.target }}");
    // The tag names the version the archives carry.
    assert!(
        run_of(step_running(&jobs["binaries"], "workspace_field version")).contains("v$version")
    );

    let pack = step_running(&jobs["archives"], "package.sh");
    assert!(run_of(pack).contains("bash scripts/dist/package.sh pack"));
    let packed: Vec<&str> = pack["env"]["DIST_TARGETS"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(packed, PLATFORMS.map(|(target, _, _)| target));

    // Archives come from the dist script only.
    let text = read(".github/workflows/release.yml");
    assert!(!text.contains("cargo build") && !text.contains("tar -c"));

    // Images of both Linux platforms, from the image script, joined into one tag.
    let arches: Vec<&str> =
        camelk_testkit::str_fields(&jobs["images"]["strategy"]["matrix"]["include"], "arch");
    assert_eq!(arches, ["amd64", "arm64"]);
    step_running(&jobs["images"], "bash scripts/image/build.sh");
    let index = run_of(step_running(&jobs["image-index"], "imagetools create"));
    assert!(index.contains("\"$ref-amd64\" \"$ref-arm64\""), "{index}");

    let release = &jobs["release"];
    let publish = run_of(step_running(release, "gh release create"));
    for asset in [
        "dist/*.tar.gz",
        "dist/*.sha256",
        "dist/krew-manifest.yaml",
        "dist/camelk-gitops.spdx.json",
        "ci/plan-comment.sh",
    ] {
        assert!(publish.contains(asset), "the release carries {asset}");
    }
    assert!(steps(release).iter().any(|s| {
        s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("anchore/sbom-action@"))
            && s["with"]["output-file"] == "dist/camelk-gitops.spdx.json"
    }));
}

#[test]
fn krew_short_description_fits_in_50_characters() {
    for path in ["krew-manifest.yaml", "scripts/dist/krew-manifest.yaml.tmpl"] {
        let line = read(path)
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("shortDescription:")
                    .map(str::trim)
                    .map(String::from)
            })
            .unwrap_or_else(|| panic!("{path} has a shortDescription"));
        assert!(
            !line.is_empty() && line.chars().count() <= 50,
            "{path}: krew cuts shortDescription at 50 characters: {line:?} ({})",
            line.chars().count()
        );
    }
}

// ------------------------------------------- the script, on a real Git repo

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=ci", "-c", "user.email=ci@example.com"])
        .args(args)
        .output()
        .unwrap();
    camelk_testkit::assert_success(&out, &format!("git {args:?}"));
}

fn rev_parse(dir: &Path, rev: &str) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["rev-parse", rev])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// ci/plan-comment.sh in `dir` with the plugin on PATH and no cluster.
fn plan_comment(dir: &Path, base: &str, head: &str) -> Output {
    let plugin_dir = Path::new(env!("CARGO_BIN_EXE_kubectl-camelk"))
        .parent()
        .unwrap();
    let path = camelk_testkit::path_with(&[plugin_dir]);
    Command::new("bash")
        .arg(repo_root().join("ci/plan-comment.sh"))
        .current_dir(dir)
        .env("PATH", path)
        .env("KUBECONFIG", dir.join("no-kubeconfig"))
        .env("CAMELK_BASE", base)
        .env("CAMELK_HEAD", head)
        .env_remove("CAMELK_PLAN_SERVER")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// The job's checkout is the base; the head's manifest is read from Git. A
/// head whose manifest is invalid fails with annotations on the diff's path,
/// though the work tree's is valid; a head whose manifest is a symlink to a
/// valid manifest outside the repository (a secret, in a real job) is the
/// link's text, so it fails too; a base missing from a shallow clone is named.
#[test]
fn the_script_validates_the_heads_manifest_from_git_not_the_work_tree() {
    let scratch = tempfile::tempdir().unwrap();
    let repo = scratch.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let valid = read("examples/operator-assignment.yaml");
    let manifest = repo.join("operator-assignment.yaml");
    std::fs::write(&manifest, &valid).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = rev_parse(&repo, "HEAD");

    git(&repo, &["switch", "-q", "-c", "invalid"]);
    std::fs::write(
        &manifest,
        valid.replace("camelk.dev/v1alpha1", "camelk.dev/v9"),
    )
    .unwrap();
    git(&repo, &["commit", "-q", "-am", "invalid head"]);
    let invalid = rev_parse(&repo, "HEAD");

    git(&repo, &["switch", "-q", "main"]);
    git(&repo, &["switch", "-q", "-c", "symlink"]);
    let outside = scratch.path().join("secret-manifest.yaml");
    std::fs::write(&outside, &valid).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink(&outside, &manifest).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "symlink head"]);
    let symlink = rev_parse(&repo, "HEAD");

    // The job: the base checked out, valid.
    git(&repo, &["switch", "-q", "--detach", &base]);
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), valid);

    let out = plan_comment(&repo, &base, &invalid);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("::error file=operator-assignment.yaml,line="),
        "annotations on the pull request's path: {stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("is invalid at"));

    let out = plan_comment(&repo, &base, &symlink);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the link's text is no manifest: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!repo.join("camelk-plan.md").exists(), "no plan, no comment");

    let missing = "0123456789abcdef0123456789abcdef01234567";
    let out = plan_comment(&repo, missing, &invalid);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("no commit {missing}")) && stderr.contains("fetch-depth 0"),
        "{stderr}"
    );
}
