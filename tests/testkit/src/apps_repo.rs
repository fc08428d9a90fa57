//! A Git repository of application manifests, as a GitOps tool reads one:
//! a bare repository served over smart HTTP ([`GitHttpServer`], Basic
//! authentication) and a work tree that commits and pushes to it, with the
//! `git` command line (no user or system configuration read).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::git_http::GitHttpServer;
use crate::scenario::GitRemote;

/// The branch every commit goes to.
pub const BRANCH: &str = "main";
/// The user and password the server demands.
pub const GIT_USER: &str = "apps-reader";
pub const GIT_PASSWORD: &str = "apps-git-7130";

/// A served bare repository `apps.git` and its work tree.
pub struct AppsRepo {
    remote: GitRemote,
    server: GitHttpServer,
}

impl AppsRepo {
    /// An empty repository, served at once.
    pub fn new() -> AppsRepo {
        // Only `remotes/` is served: nothing else of the folder is reachable.
        let remote = GitRemote::with_bare("remotes/apps.git");
        let server =
            GitHttpServer::start(&remote.dir.path().join("remotes"), GIT_USER, GIT_PASSWORD);
        AppsRepo { remote, server }
    }

    /// The repository's URL on the server.
    pub fn url(&self) -> String {
        self.server.url("apps.git")
    }

    /// The work tree (a clone whose commits [`AppsRepo::push`] sends).
    pub fn work(&self) -> PathBuf {
        self.remote.work()
    }

    /// Writes `files` (paths relative to the work tree), commits them and
    /// pushes `main`; returns the commit id.
    pub fn commit<P: AsRef<str>, T: AsRef<str>>(&self, files: &[(P, T)], message: &str) -> String {
        self.remote.commit(files, message)
    }

    /// Pushes `branch` of the work tree to `main` of the served repository
    /// (a merge of that branch, as a fast-forward); returns the commit id.
    pub fn push(&self, branch: &str) -> String {
        self.remote.push_branch(branch)
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
    crate::assert_success(&out, &format!("git {}", args.join(" ")));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
