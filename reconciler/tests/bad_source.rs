//! Bad input to the sync's Git source, on real repositories made with the
//! `git` program: a manifest that is a symbolic link in the commit, one over
//! the size limit, one that is not UTF-8, and a branch name that is not a
//! valid ref (given to the library and to `reconciler sync`). Each is an
//! error naming what is wrong; nothing is fetched for an invalid branch (the
//! cache is never created) and the remote is never written.

#![cfg(feature = "server")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use camelk_reconciler::api::MAX_MANIFEST_BYTES;
use camelk_reconciler::source::{GitSource, SourceError};
// The one `git` runner of the tests: no user or system configuration read.
use camelk_testkit::apps_repo::git;

/// A repository on branch `main` whose one commit holds what `fill` writes.
fn remote(fill: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    fill(dir.path());
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "manifest"]);
    dir
}

/// Every ref and the head of `dir`: what a write to the remote would change.
fn refs(dir: &Path) -> String {
    git(dir, &["for-each-ref"]) + &git(dir, &["status", "--porcelain"])
}

async fn fetch(remote: &Path, branch: &str, cache: &Path) -> Result<String, SourceError> {
    let url = remote.display().to_string();
    let mut source = GitSource::new(&url, branch, "operator-assignment.yaml", cache);
    source.fetch().await.map(|r| r.text)
}

const MANIFEST: &str = "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\nmetadata:\n  name: shop\nspec:\n  operators:\n    - id: operator-1\n      namespace: camel-k\n  defaultOperator: operator-1\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_in_the_commit_is_refused_naming_its_target() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    std::fs::write(&secret, MANIFEST).unwrap();
    for target in [
        secret.display().to_string(),
        "../../etc/passwd".into(),
        "real.yaml".into(),
    ] {
        let repo = remote(|dir| {
            std::fs::write(dir.join("real.yaml"), MANIFEST).unwrap();
            std::os::unix::fs::symlink(&target, dir.join("operator-assignment.yaml")).unwrap();
        });
        let before = refs(repo.path());
        let cache = tempfile::tempdir().unwrap();
        let error = fetch(repo.path(), "main", &cache.path().join("c"))
            .await
            .unwrap_err();
        assert!(matches!(error, SourceError::Symlink { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "operator-assignment.yaml at commit {} is a symbolic link to `{target}`",
                git(repo.path(), &["rev-parse", "HEAD"]).trim()
            )),
            "{message}"
        );
        assert!(message.contains("never follows a link"), "{message}");
        assert_eq!(refs(repo.path()), before);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_over_the_size_limit_is_refused_from_its_header() {
    let repo = remote(|dir| {
        let mut text = MANIFEST.to_string();
        while text.len() <= MAX_MANIFEST_BYTES {
            text.push_str("# padding padding padding padding padding padding padding padding\n");
        }
        std::fs::write(dir.join("operator-assignment.yaml"), text).unwrap();
    });
    let cache = tempfile::tempdir().unwrap();
    let error = fetch(repo.path(), "main", &cache.path().join("c"))
        .await
        .unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains(&format!("over the limit of {MAX_MANIFEST_BYTES} bytes")),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_that_is_not_utf8_is_refused_not_mangled() {
    let repo = remote(|dir| {
        let mut bytes = MANIFEST.as_bytes().to_vec();
        bytes.extend_from_slice(b"# caf\xe9\n");
        std::fs::write(dir.join("operator-assignment.yaml"), bytes).unwrap();
    });
    let cache = tempfile::tempdir().unwrap();
    let error = fetch(repo.path(), "main", &cache.path().join("c"))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains(&format!("is not UTF-8 (at byte {})", MANIFEST.len() + 5)),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_that_is_not_a_valid_ref_is_refused_before_any_fetch() {
    let repo =
        remote(|dir| std::fs::write(dir.join("operator-assignment.yaml"), MANIFEST).unwrap());
    // A branch `a..b` cannot exist; a refspec built from `main:refs/x` would
    // write elsewhere than the tracking ref.
    for branch in ["a..b", "main:refs/heads/x", "-x", "a b", "x.lock", ""] {
        let cache = tempfile::tempdir().unwrap();
        let error = fetch(repo.path(), branch, &cache.path().join("c"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, SourceError::InvalidBranch { .. }),
            "{branch}: {error:?}"
        );
        assert!(
            error
                .to_string()
                .contains(&format!("`{branch}` is not a valid branch name")),
            "{error}"
        );
        assert!(
            !cache.path().join("c").exists(),
            "{branch}: the cache was created"
        );
    }
    // The valid name is fetched: the check refuses the names, not the source.
    let cache = tempfile::tempdir().unwrap();
    assert_eq!(
        fetch(repo.path(), "main", &cache.path().join("c"))
            .await
            .unwrap(),
        MANIFEST
    );
}

#[test]
fn reconciler_sync_refuses_an_invalid_branch_before_connecting() {
    let repo =
        remote(|dir| std::fs::write(dir.join("operator-assignment.yaml"), MANIFEST).unwrap());
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args(["sync", "--repo"])
        .arg(repo.path())
        .args(["--branch", "a..b", "--cache-dir"])
        .arg(&cache)
        // A kubeconfig that cannot be read: the refusal comes first.
        .args([
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "--listen",
            "127.0.0.1:0",
        ])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: --branch: `a..b` is not a valid branch name"),
        "{stderr}"
    );
    assert!(!stderr.contains("kubeconfig"), "{stderr}");
    assert!(!cache.exists());
    assert!(started.elapsed() < Duration::from_secs(10));
}
