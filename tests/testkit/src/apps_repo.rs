//! A Git repository of application manifests, as a GitOps tool reads one:
//! a bare repository served over smart HTTP ([`GitHttpServer`], Basic
//! authentication) and a work tree that commits and pushes to it, with the
//! `git` command line (no user or system configuration read).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::git_http::GitHttpServer;

/// The branch every commit goes to.
pub const BRANCH: &str = "main";
/// The user and password the server demands.
pub const GIT_USER: &str = "apps-reader";
pub const GIT_PASSWORD: &str = "apps-git-7130";

/// A served bare repository `apps.git` and its work tree.
pub struct AppsRepo {
    dir: tempfile::TempDir,
    server: GitHttpServer,
}

impl AppsRepo {
    /// An empty repository, served at once.
    pub fn new() -> AppsRepo {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let remotes = dir.path().join("remotes");
        std::fs::create_dir_all(&remotes).expect("the remotes folder");
        git(
            &remotes,
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch",
                BRANCH,
                "apps.git",
            ],
        );
        git(
            dir.path(),
            &["init", "--quiet", "--initial-branch", BRANCH, "work"],
        );
        let server = GitHttpServer::start(&remotes, GIT_USER, GIT_PASSWORD);
        AppsRepo { dir, server }
    }

    /// The repository's URL on the server.
    pub fn url(&self) -> String {
        self.server.url("apps.git")
    }

    /// The work tree (a clone whose commits [`AppsRepo::push`] sends).
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes `files` (paths relative to the work tree), commits them and
    /// pushes `main`; returns the commit id.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        let work = self.work();
        for (path, text) in files {
            let path = work.join(path);
            std::fs::create_dir_all(path.parent().expect("a file in a folder"))
                .expect("the file's folder");
            std::fs::write(path, text).expect("the file");
        }
        git(&work, &["add", "--all"]);
        git(&work, &["commit", "--quiet", "--message", message]);
        self.push(BRANCH)
    }

    /// Pushes `branch` of the work tree to `main` of the served repository
    /// (a merge of that branch, as a fast-forward); returns the commit id.
    pub fn push(&self, branch: &str) -> String {
        let work = self.work();
        let remote = self.dir.path().join("remotes/apps.git");
        git(
            &work,
            &[
                "push",
                "--quiet",
                remote.to_str().expect("a UTF-8 path"),
                &format!("{branch}:{BRANCH}"),
            ],
        );
        git(&work, &["rev-parse", branch])
    }
}

impl Default for AppsRepo {
    fn default() -> Self {
        AppsRepo::new()
    }
}

/// Runs `git args` in `dir` with an identity of its own and no user or
/// system configuration; panics with its stderr on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Apps Author",
            "-c",
            "user.email=apps@camelk.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git on the PATH");
    assert!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
