//! `--push` over HTTP and HTTPS with the user's credentials: a token from
//! `CAMELK_GIT_TOKEN`, and Git's credential helper. The server is the
//! testkit's: `git http-backend` (Git's own smart-HTTP CGI) behind a small
//! HTTP/1.1 front end on 127.0.0.1 that demands Basic authentication, with
//! TLS for the HTTPS cases.

mod common;

use std::path::PathBuf;

use camelk_testkit::git_http::GitHttpServer;
use common::{ASSIGN_ORDERS, SHOP, camelk, git, repo_with};
use predicates::prelude::*;

fn setup() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let repo = repo_with(SHOP);
    let remotes = tempfile::tempdir().unwrap();
    let bare = remotes.path().join("gitops.git");
    git(remotes.path(), &["init", "-q", "--bare", "gitops.git"]);
    git(
        repo.path(),
        &["push", "-q", &bare.display().to_string(), "main"],
    );
    (repo, remotes, bare)
}

fn add_origin(repo: &std::path::Path, server: &GitHttpServer) {
    git(
        repo,
        &["remote", "add", "origin", &server.url("gitops.git")],
    );
}

#[test]
fn push_over_http_with_a_token() {
    let (repo, remotes, bare) = setup();
    let server = GitHttpServer::start(remotes.path(), "x-access-token", "s3cret-token");
    add_origin(repo.path(), &server);
    camelk(repo.path())
        .env("CAMELK_GIT_TOKEN", "s3cret-token")
        .args(ASSIGN_ORDERS)
        .args(["--branch", "by-token", "--push"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("pushed by-token to origin")
                .and(predicate::str::contains("s3cret").not()),
        );
    assert_eq!(
        git(&bare, &["rev-parse", "by-token"]),
        git(repo.path(), &["rev-parse", "HEAD"])
    );
}

#[test]
fn push_over_http_with_the_credential_helper() {
    let (repo, remotes, bare) = setup();
    let server = GitHttpServer::start(remotes.path(), "alice", "helper-password");
    add_origin(repo.path(), &server);
    git(
        repo.path(),
        &[
            "config",
            "credential.helper",
            "!f() { echo username=alice; echo password=helper-password; }; f",
        ],
    );
    camelk(repo.path())
        .args(ASSIGN_ORDERS)
        .args(["--branch", "by-helper", "--push"])
        .assert()
        .success();
    assert_eq!(
        git(&bare, &["rev-parse", "by-helper"]),
        git(repo.path(), &["rev-parse", "HEAD"])
    );
}

#[test]
fn wrong_credentials_fail_the_push_without_leaking_them() {
    let (repo, remotes, bare) = setup();
    let server = GitHttpServer::start(remotes.path(), "x-access-token", "right");
    add_origin(repo.path(), &server);
    let output = camelk(repo.path())
        .env("CAMELK_GIT_TOKEN", "wrong-token")
        .args(ASSIGN_ORDERS)
        .args(["--branch", "nope", "--push"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the push of `nope` to `origin` was rejected"),
        "{stderr}"
    );
    assert!(!stderr.contains("wrong-token"), "{stderr}");
    assert_eq!(git(&bare, &["for-each-ref", "refs/heads/nope"]), "");
}

/// The CA of `server`, or of no server at all, written where `SSL_CERT_FILE`
/// can name it.
fn ca_file(dir: &std::path::Path, pem: &str) -> PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

#[test]
fn push_over_https_trusts_the_ca_named_by_ssl_cert_file() {
    let (repo, remotes, bare) = setup();
    let server = GitHttpServer::start_tls(remotes.path(), "x-access-token", "tls-token-7731");
    add_origin(repo.path(), &server);
    let trust = tempfile::tempdir().unwrap();
    let ca = ca_file(trust.path(), server.ca_cert().unwrap());
    camelk(repo.path())
        .env("SSL_CERT_FILE", &ca)
        .env("CAMELK_GIT_TOKEN", "tls-token-7731")
        .args(ASSIGN_ORDERS)
        .args(["--branch", "over-tls", "--push"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("pushed over-tls to origin")
                .and(predicate::str::contains("tls-token-7731").not()),
        );
    assert_eq!(
        git(&bare, &["rev-parse", "over-tls"]),
        git(repo.path(), &["rev-parse", "HEAD"])
    );
}

#[test]
fn push_over_https_refuses_a_certificate_no_trusted_ca_signed() {
    let (repo, remotes, bare) = setup();
    let server = GitHttpServer::start_tls(remotes.path(), "x-access-token", "tls-token-7731");
    add_origin(repo.path(), &server);
    // Trust another server's CA: this server's certificate is then unknown.
    let other = GitHttpServer::start_tls(remotes.path(), "x-access-token", "unused");
    let trust = tempfile::tempdir().unwrap();
    let ca = ca_file(trust.path(), other.ca_cert().unwrap());
    let output = camelk(repo.path())
        .env("SSL_CERT_FILE", &ca)
        .env("CAMELK_GIT_TOKEN", "tls-token-7731")
        .args(ASSIGN_ORDERS)
        .args(["--branch", "untrusted", "--push"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "the push of `untrusted` to `origin` did not start: \
             the remote's TLS certificate is not trusted here"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("tls-token-7731"), "{stderr}");
    assert_eq!(server.refused(), 0, "no credential was sent");
    assert_eq!(git(&bare, &["for-each-ref", "refs/heads/untrusted"]), "");
}
