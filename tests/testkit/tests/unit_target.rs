//! `make unit` runs every test binary that starts no server, and only those:
//! each integration test of the workspace is either named in the Makefile's
//! `UNIT_TESTS`, or its own sources start something `make unit` leaves out
//! (a control plane, a Go-built binary, a Git or SSH server). So a new test
//! binary is classified the day it is added, and the list cannot go stale.
//!
//! A test binary's own sources are its file, or for `tests/NAME/main.rs` every
//! file of `tests/NAME/`; helpers shared by several binaries (`tests/common/`,
//! `tests/support/`) are left out, as they hold the helpers of both kinds.
//! At run time `make unit` also sets `CAMELK_UNIT_ONLY`, so a listed binary
//! that asks the testkit for a Go-built binary fails at once
//! (`camelk_testkit::binaries::UNIT_ONLY_ENV`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What in a test binary's own code (comments left out) starts a process
/// `make unit` does not run, and what that process is.
const STARTS_A_SERVER: &[(&str, &str)] = &[
    ("shared()", "the shared control plane"),
    ("cluster::start", "a control plane"),
    ("TestCluster", "a control plane"),
    ("binaries::", "a Go-built binary"),
    ("upstream_operator", "an upstream Camel K operator"),
    ("flux::", "Flux"),
    ("GitHttpServer", "a Git HTTP server"),
    ("git-daemon", "a Git daemon"),
    ("sshd", "an SSH server"),
];

/// The names `UNIT_TESTS := a b \` ... of the Makefile.
fn unit_tests(makefile: &str) -> BTreeSet<String> {
    let mut lines = makefile
        .lines()
        .skip_while(|l| !l.starts_with("UNIT_TESTS"));
    let first = lines.next().expect("the Makefile has no UNIT_TESTS");
    let mut names = BTreeSet::new();
    let mut line = first.split_once('=').expect("UNIT_TESTS := ...").1;
    loop {
        let more = line.trim_end().ends_with('\\');
        names.extend(
            line.trim_end()
                .trim_end_matches('\\')
                .split_whitespace()
                .map(str::to_string),
        );
        match lines.next() {
            Some(next) if more => line = next,
            _ => return names,
        }
    }
}

/// Every integration-test target of the workspace: (package, name) → its root file.
fn test_targets(root: &Path) -> BTreeMap<(String, String), PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .expect("run cargo metadata");
    camelk_testkit::assert_success(&out, "cargo metadata");
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut targets = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            if target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "test")
            {
                targets.insert(
                    (
                        package["name"].as_str().unwrap().to_string(),
                        target["name"].as_str().unwrap().to_string(),
                    ),
                    PathBuf::from(target["src_path"].as_str().unwrap()),
                );
            }
        }
    }
    targets
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What the test binary rooted at `src` starts, by the markers above.
fn servers_started(src: &Path) -> BTreeSet<&'static str> {
    let mut files = vec![src.to_path_buf()];
    if src.file_name().is_some_and(|n| n == "main.rs") {
        files.clear();
        rust_files(src.parent().unwrap(), &mut files);
    }
    let mut started = BTreeSet::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (marker, what) in STARTS_A_SERVER {
                if code.contains(marker) {
                    started.insert(*what);
                }
            }
        }
    }
    started
}

#[test]
fn every_test_binary_is_in_make_unit_or_starts_a_server() {
    let root = camelk_testkit::workspace_root();
    let listed = unit_tests(&fs::read_to_string(root.join("Makefile")).unwrap());
    let targets = test_targets(&root);
    // Not vacuous: the workspace has test binaries of both kinds.
    assert!(targets.len() >= 20, "{targets:?}");

    let mut problems = Vec::new();
    let names: BTreeSet<&String> = targets.keys().map(|(_, name)| name).collect();
    for name in listed.iter().filter(|n| !names.contains(n)) {
        problems.push(format!(
            "UNIT_TESTS names `{name}`, which is no test binary"
        ));
    }
    let (mut unit, mut other) = (0, 0);
    // This file names every marker, and starts nothing.
    let this_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/unit_target.rs");
    for ((package, name), src) in &targets {
        let started = if *src == this_file {
            BTreeSet::new()
        } else {
            servers_started(src)
        };
        let started: Vec<&str> = started.into_iter().collect();
        match (listed.contains(name), started.is_empty()) {
            (true, true) => unit += 1,
            (false, false) => other += 1,
            (true, false) => problems.push(format!(
                "{package} --test {name} starts {}: take it out of UNIT_TESTS",
                started.join(", ")
            )),
            (false, true) => problems.push(format!(
                "{package} --test {name} starts no server: add it to UNIT_TESTS in the Makefile \
                 (or add what it starts to STARTS_A_SERVER here)"
            )),
        }
    }
    assert!(
        problems.is_empty(),
        "the Makefile's UNIT_TESTS against the test binaries:\n  {}",
        problems.join("\n  ")
    );
    assert!(
        unit >= 10 && other >= 10,
        "{unit} in make unit, {other} not"
    );
}

#[test]
fn the_list_is_read_across_continued_lines() {
    let makefile = "X := 1\nUNIT_TESTS := a b \\\n\tc \\\n\td\n\nunit:\n\techo $(UNIT_TESTS)\n";
    assert_eq!(
        unit_tests(makefile),
        ["a", "b", "c", "d"].map(String::from).into()
    );
}
