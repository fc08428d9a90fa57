//! `--push` end to end: to a bare repository on disk, over a real
//! `git daemon` on 127.0.0.1, and to a remote whose hook refuses the push.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{
    ASSIGN_ORDERS, SHOP, bare_remote, camelk, free_port, git, repo_with, wait_for_port, words,
};
use predicates::prelude::*;

/// A `git daemon` serving `root` on a free loopback port; stopped on drop.
struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    fn start(root: &Path) -> Daemon {
        let port = free_port();
        // `git-daemon` itself, not `git daemon`: the wrapper runs it as a child
        // of its own, which outlives a kill of the wrapper.
        let exec_path = git(root, &["--exec-path"]);
        let child = Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args([
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", root.display()),
                &root.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting git daemon");
        wait_for_port(port, "git daemon");
        Daemon { child, port }
    }

    fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn push_to_a_bare_repository_on_disk() {
    let repo = repo_with(SHOP);
    let remotes = tempfile::tempdir().unwrap();
    let bare = bare_remote(remotes.path(), "gitops.git", repo.path());
    git(
        repo.path(),
        &["remote", "add", "origin", &bare.display().to_string()],
    );
    camelk(repo.path())
        .args(ASSIGN_ORDERS)
        .args(["--branch", "move-orders", "--push"])
        .assert()
        .success()
        .stderr(predicate::str::contains("pushed move-orders to origin"));
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/move-orders"]),
        git(repo.path(), &["rev-parse", "HEAD"])
    );
}

#[test]
fn push_over_git_daemon_on_loopback() {
    let repo = repo_with(SHOP);
    let remotes = tempfile::tempdir().unwrap();
    let bare = bare_remote(remotes.path(), "gitops.git", repo.path());
    let daemon = Daemon::start(remotes.path());
    git(
        repo.path(),
        &["remote", "add", "upstream", &daemon.url("gitops.git")],
    );
    camelk(repo.path())
        .args(words(
            "rollout --from operator-1 --to operator-2 --steps 10%,100%",
        ))
        .args(["--branch", "rollout-2", "--push", "--remote", "upstream"])
        .assert()
        .success();
    let pushed = git(&bare, &["log", "-1", "--format=%s", "refs/heads/rollout-2"]);
    assert_eq!(pushed, "Roll out operator-1 -> operator-2\n");
    let file = git(
        &bare,
        &["show", "refs/heads/rollout-2:operator-assignment.yaml"],
    );
    assert!(file.contains("steps: [\"10%\", \"100%\"]"), "{file}");
}

#[test]
fn a_refused_push_is_an_error_and_the_remote_is_unchanged() {
    let repo = repo_with(SHOP);
    let remotes = tempfile::tempdir().unwrap();
    let bare = bare_remote(remotes.path(), "protected.git", repo.path());
    let hook = bare.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'branches are created by the platform team only' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let daemon = Daemon::start(remotes.path());
    git(
        repo.path(),
        &["remote", "add", "origin", &daemon.url("protected.git")],
    );
    let refs_before = git(&bare, &["for-each-ref"]);
    camelk(repo.path())
        .args(ASSIGN_ORDERS)
        .args(["--branch", "move-orders", "--push"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("the push of `move-orders` to `origin` was rejected").and(
                predicate::str::contains(
                    "hint: the commit stays on the local branch move-orders, checked out; push it with `git push origin move-orders`",
                ),
            ),
        );
    assert_eq!(git(&bare, &["for-each-ref"]), refs_before);
    // The commit stays on the local branch, so the push can be retried.
    assert_eq!(
        git(repo.path(), &["branch", "--show-current"]),
        "move-orders\n"
    );
}

#[test]
fn push_to_a_missing_remote_is_refused_before_writing() {
    let repo = repo_with(SHOP);
    let before = common::state(repo.path());
    camelk(repo.path())
        .args(ASSIGN_ORDERS)
        .args(["--push", "--remote", "nowhere"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("finding the remote"));
    assert_eq!(common::state(repo.path()), before);
}
