//! `--push` over HTTP and HTTPS with the user's credentials: a token from
//! `CAMELK_GIT_TOKEN`, and Git's credential helper. The server is the
//! testkit's: `git http-backend` (Git's own smart-HTTP CGI) behind a small
//! HTTP/1.1 front end on 127.0.0.1 that demands Basic authentication, with
//! TLS for the HTTPS cases.

mod common;

use std::path::{Path, PathBuf};

use camelk_testkit::git_http::GitHttpServer;
use common::{ASSIGN_ORDERS, SHOP, bare_remote, camelk, git, repo_with};

/// A work tree on `main`, and a bare `gitops.git` it has pushed `main` to,
/// served by the testkit's server as the work tree's `origin`.
struct Served {
    // First, so that it stops before its folder goes.
    server: GitHttpServer,
    /// The password the server demands, which a token may be.
    password: String,
    work: tempfile::TempDir,
    remotes: tempfile::TempDir,
    bare: PathBuf,
}

impl Served {
    /// Served over HTTP, to `user` with `password`.
    fn http(user: &str, password: &str) -> Served {
        Served::new(password, |remotes| {
            GitHttpServer::start(remotes, user, password)
        })
    }

    /// Served over HTTPS (a CA of the server's own), to `user` with `password`.
    fn https(user: &str, password: &str) -> Served {
        Served::new(password, |remotes| {
            GitHttpServer::start_tls(remotes, user, password)
        })
    }

    fn new(password: &str, start: impl FnOnce(&Path) -> GitHttpServer) -> Served {
        let work = repo_with(SHOP);
        let remotes = tempfile::tempdir().unwrap();
        let bare = bare_remote(remotes.path(), "gitops.git", work.path());
        let server = start(remotes.path());
        git(
            work.path(),
            &["remote", "add", "origin", &server.url("gitops.git")],
        );
        Served {
            server,
            password: password.into(),
            work,
            remotes,
            bare,
        }
    }

    /// The plugin in the work tree.
    fn camelk(&self) -> assert_cmd::Command {
        camelk(self.work.path())
    }

    /// [`Served::camelk`] with `token` in `CAMELK_GIT_TOKEN`.
    fn camelk_with_token(&self, token: &str) -> assert_cmd::Command {
        let mut cmd = self.camelk();
        cmd.env("CAMELK_GIT_TOKEN", token);
        cmd
    }

    /// [`Served::camelk_with_token`] with the password as the token.
    fn camelk_authorized(&self) -> assert_cmd::Command {
        self.camelk_with_token(&self.password)
    }

    /// [`Served::camelk_authorized`] trusting only the CA `pem`, written
    /// where `SSL_CERT_FILE` names it.
    fn camelk_trusting(&self, pem: &str) -> assert_cmd::Command {
        let ca = self.remotes.path().join("ca.pem");
        std::fs::write(&ca, pem).unwrap();
        let mut cmd = self.camelk_authorized();
        cmd.env("SSL_CERT_FILE", ca);
        cmd
    }

    /// Runs `cmd` (from [`Served::camelk`]) assigning shop/orders on
    /// `branch` with `--push`: its exit code and stderr, which never shows
    /// `secret`.
    fn assign_and_push(
        &self,
        cmd: &mut assert_cmd::Command,
        branch: &str,
        secret: &str,
    ) -> (Option<i32>, String) {
        let output = cmd
            .args(ASSIGN_ORDERS)
            .args(["--branch", branch, "--push"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!stderr.contains(secret), "{branch}: {stderr}");
        (output.status.code(), stderr)
    }

    /// [`Served::assign_and_push`], which must succeed and land: the
    /// remote's `branch` is the work tree's HEAD.
    fn assert_pushed(&self, cmd: &mut assert_cmd::Command, branch: &str, secret: &str) {
        let (code, stderr) = self.assign_and_push(cmd, branch, secret);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!("pushed {branch} to origin")),
            "{stderr}"
        );
        assert_eq!(
            git(&self.bare, &["rev-parse", branch]),
            git(self.work.path(), &["rev-parse", "HEAD"])
        );
    }

    /// [`Served::assign_and_push`], which must fail (exit 1) saying `says`,
    /// and leave the remote without `branch`.
    fn assert_not_pushed(
        &self,
        cmd: &mut assert_cmd::Command,
        branch: &str,
        secret: &str,
        says: &str,
    ) {
        let (code, stderr) = self.assign_and_push(cmd, branch, secret);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        let refs = format!("refs/heads/{branch}");
        assert_eq!(git(&self.bare, &["for-each-ref", &refs]), "");
    }
}

#[test]
fn push_over_http_with_a_token() {
    let served = Served::http("x-access-token", "s3cret-token");
    served.assert_pushed(&mut served.camelk_authorized(), "by-token", "s3cret");
}

#[test]
fn push_over_http_with_the_credential_helper() {
    let served = Served::http("alice", "helper-password");
    git(
        served.work.path(),
        &[
            "config",
            "credential.helper",
            "!f() { echo username=alice; echo password=helper-password; }; f",
        ],
    );
    served.assert_pushed(&mut served.camelk(), "by-helper", "helper-password");
}

#[test]
fn wrong_credentials_fail_the_push_without_leaking_them() {
    let served = Served::http("x-access-token", "right");
    served.assert_not_pushed(
        &mut served.camelk_with_token("wrong-token"),
        "nope",
        "wrong-token",
        "the push of `nope` to `origin` was rejected",
    );
}

#[test]
fn push_over_https_trusts_the_ca_named_by_ssl_cert_file() {
    let served = Served::https("x-access-token", "tls-token-7731");
    let ca = served.server.ca_cert().unwrap();
    served.assert_pushed(
        &mut served.camelk_trusting(ca),
        "over-tls",
        "tls-token-7731",
    );
}

#[test]
fn push_over_https_refuses_a_certificate_no_trusted_ca_signed() {
    let served = Served::https("x-access-token", "tls-token-7731");
    // Trust another server's CA: this server's certificate is then unknown.
    let other = GitHttpServer::start_tls(served.remotes.path(), "x-access-token", "unused");
    served.assert_not_pushed(
        &mut served.camelk_trusting(other.ca_cert().unwrap()),
        "untrusted",
        "tls-token-7731",
        "the push of `untrusted` to `origin` did not start: \
         the remote's TLS certificate is not trusted here",
    );
    assert_eq!(served.server.refused(), 0, "no credential was sent");
}
