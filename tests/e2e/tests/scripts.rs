//! `scripts/prereqs.sh`, which `make demo` and `make test` run before
//! anything slow: on a machine without Go or Rust it stops at once, naming
//! each missing thing with the command that installs it.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    camelk_testkit::workspace_root().join("scripts/prereqs.sh")
}

/// A `PATH` with only the tools the script itself uses, so that Go, cargo
/// and rustup are missing wherever this machine keeps them.
fn bare_path() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    for tool in ["dpkg-query", "grep", "sed", "sort", "head"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| PathBuf::from(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is on this Debian machine"));
        std::os::unix::fs::symlink(found, dir.path().join(tool)).unwrap();
    }
    let path = dir.path().display().to_string();
    (dir, path)
}

#[test]
fn a_machine_without_go_or_rust_is_told_what_to_install() {
    let started = Instant::now();
    let (_dir, path) = bare_path();
    let out = Command::new("/bin/bash")
        .arg(script())
        .arg("test")
        .env("PATH", path)
        .env_remove("FUZZ_TOOLCHAIN")
        .output()
        .expect("bash runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for needed in [
        "make test needs:",
        "Go >= 1.26: install it from https://go.dev/dl/",
        "Rust (cargo): curl https://sh.rustup.rs -sSf | sh",
        "rustup toolchain install nightly",
    ] {
        assert!(stderr.contains(needed), "names {needed:?}:\n{stderr}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "checked in seconds, not after a build: {:?}",
        started.elapsed()
    );
}

#[test]
fn the_demo_needs_no_test_tools() {
    let (_dir, path) = bare_path();
    let out = Command::new("/bin/bash")
        .arg(script())
        .arg("demo")
        .env("PATH", path)
        .output()
        .expect("bash runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("make demo needs:"), "{stderr}");
    assert!(
        !stderr.contains("nightly") && !stderr.contains("docker-registry"),
        "the demo asks only for what it runs:\n{stderr}"
    );
}

#[test]
fn an_unknown_goal_is_refused_with_the_usage() {
    let out = Command::new("bash")
        .arg(script())
        .arg("deploy")
        .output()
        .expect("bash runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: scripts/prereqs.sh"));
}
