//! `--push` over HTTP with the user's credentials: a token from
//! `CAMELK_GIT_TOKEN`, and Git's credential helper. The server is
//! `git http-backend` (Git's own smart-HTTP CGI) behind a small HTTP/1.1
//! front end on 127.0.0.1 that demands Basic authentication.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{ASSIGN_ORDERS, SHOP, camelk, git, repo_with};
use predicates::prelude::*;

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Serves the repositories under `root` until the test process ends;
/// returns the port. Requests without `Authorization: Basic <expected>` get
/// a 401, as a real Git host answers.
fn serve(root: PathBuf, user: &str, password: &str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let expected = format!("Basic {}", base64(format!("{user}:{password}").as_bytes()));
    let user = user.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = handle(stream, &root, &expected, &user);
        }
    });
    port
}

fn handle(stream: TcpStream, root: &Path, expected: &str, user: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    let mut out = stream;
    if header("authorization").as_deref() != Some(expected) {
        return out.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    cgi.stdin.take().unwrap().write_all(&body)?;
    let output = cgi.wait_with_output()?;
    let split = output
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    let split = split.or_else(|| {
        output
            .stdout
            .windows(2)
            .position(|w| w == b"\n\n")
            .map(|i| (i, 2))
    });
    let (end, skip) = split.unwrap_or((0, 0));
    let cgi_headers = String::from_utf8_lossy(&output.stdout[..end]).into_owned();
    let response_body = &output.stdout[end + skip..];
    let mut status = "200 OK".to_string();
    let mut response = String::new();
    for line in cgi_headers.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                status = value.trim().to_string()
            }
            Some(_) => response.push_str(&format!("{line}\r\n")),
            None => {}
        }
    }
    out.write_all(
        format!(
            "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
            response_body.len()
        )
        .as_bytes(),
    )?;
    out.write_all(response_body)
}

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

#[test]
fn push_over_http_with_a_token() {
    let (repo, remotes, bare) = setup();
    let port = serve(
        remotes.path().to_path_buf(),
        "x-access-token",
        "s3cret-token",
    );
    git(
        repo.path(),
        &[
            "remote",
            "add",
            "origin",
            &format!("http://127.0.0.1:{port}/gitops.git"),
        ],
    );
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
    let port = serve(remotes.path().to_path_buf(), "alice", "helper-password");
    git(
        repo.path(),
        &[
            "remote",
            "add",
            "origin",
            &format!("http://127.0.0.1:{port}/gitops.git"),
        ],
    );
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
    let port = serve(remotes.path().to_path_buf(), "x-access-token", "right");
    git(
        repo.path(),
        &[
            "remote",
            "add",
            "origin",
            &format!("http://127.0.0.1:{port}/gitops.git"),
        ],
    );
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
