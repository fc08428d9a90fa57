//! `--push` over SSH with the keys of the user's ssh-agent, to a real
//! OpenSSH server on 127.0.0.1 (its own host key, config and authorized
//! key; `.ci/run` installs `openssh-server`). The server's host key is
//! checked against `~/.ssh/known_hosts`, as `git push` does.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ASSIGN_ORDERS, SHOP, bare_remote, camelk, free_port, git, repo_with, wait_for_port};
use predicates::prelude::*;

const SSHD: &str = "/usr/sbin/sshd";

fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut command = Command::new(program);
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    camelk_testkit::assert_success(&output, &format!("{program} {args:?}"));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn keypair(path: &Path) {
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            path.to_str().unwrap(),
        ],
        &[],
    );
}

/// A process stopped on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// sshd on a free loopback port that lets in one public key, for the user
/// running the tests.
struct Sshd {
    _process: Running,
    port: u16,
    host_key_pub: String,
}

impl Sshd {
    fn start(dir: &Path, authorized: &Path) -> Sshd {
        let host_key = dir.join("host_ed25519");
        keypair(&host_key);
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
                 PidFile {pid}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n",
                host = host_key.display(),
                keys = authorized.display(),
                pid = dir.join("sshd.pid").display(),
            ),
        )
        .unwrap();
        // Privilege separation needs its directory when sshd runs as root.
        let _ = std::fs::create_dir_all("/run/sshd");
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {SSHD} (package openssh-server): {e}"));
        let process = Running(child);
        wait_for_port(port, "sshd");
        let host_key_pub = std::fs::read_to_string(dir.join("host_ed25519.pub")).unwrap();
        Sshd {
            _process: process,
            port,
            host_key_pub,
        }
    }

    fn url(&self, path: &Path) -> String {
        let user = run("id", &["-un"], &[]);
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            user.trim(),
            self.port,
            path.display()
        )
    }

    /// A known_hosts line for this server, as `ssh` writes one for a port.
    fn known_hosts_line(&self) -> String {
        let mut fields = self.host_key_pub.split_whitespace();
        let (kind, key) = (fields.next().unwrap(), fields.next().unwrap());
        format!("[127.0.0.1]:{} {kind} {key}\n", self.port)
    }
}

/// An ssh-agent on its own socket, holding `key`.
struct Agent {
    _process: Running,
    socket: PathBuf,
}

impl Agent {
    fn start(dir: &Path, key: Option<&Path>) -> Agent {
        let socket = dir.join("agent.sock");
        let child = Command::new("ssh-agent")
            .args(["-D", "-a", socket.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting ssh-agent");
        let process = Running(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "ssh-agent made no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(key) = key {
            run(
                "ssh-add",
                &["-q", key.to_str().unwrap()],
                &[("SSH_AUTH_SOCK", &socket)],
            );
        }
        Agent {
            _process: process,
            socket,
        }
    }
}

/// Everything one push needs: a server letting in the user key, a bare
/// remote behind it, and a HOME whose known_hosts names the server.
struct Setup {
    dir: tempfile::TempDir,
    sshd: Sshd,
    user_key: PathBuf,
    bare: PathBuf,
    home: PathBuf,
    repo: tempfile::TempDir,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let user_key = dir.path().join("id_ed25519");
    keypair(&user_key);
    let sshd = Sshd::start(dir.path(), &dir.path().join("id_ed25519.pub"));

    let repo = repo_with(SHOP);
    let bare = bare_remote(dir.path(), "gitops.git", repo.path());
    git(repo.path(), &["remote", "add", "origin", &sshd.url(&bare)]);

    // No key files in HOME: only the agent can authenticate.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/known_hosts"), sshd.known_hosts_line()).unwrap();
    Setup {
        dir,
        sshd,
        user_key,
        bare,
        home,
        repo,
    }
}

fn assign_and_push(setup: &Setup, agent: &Agent, branch: &str) -> assert_cmd::assert::Assert {
    camelk(setup.repo.path())
        .env("HOME", &setup.home)
        .env("SSH_AUTH_SOCK", &agent.socket)
        .args(ASSIGN_ORDERS)
        .args(["--branch", branch, "--push"])
        .timeout(Duration::from_secs(60))
        .assert()
}

fn remote_has(bare: &Path, branch: &str) -> bool {
    Command::new("git")
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .current_dir(bare)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn push_over_ssh_with_the_agents_key() {
    let setup = setup();
    let agent = Agent::start(setup.dir.path(), Some(&setup.user_key));
    assign_and_push(&setup, &agent, "move-orders")
        .success()
        .stderr(predicate::str::contains("pushed move-orders to origin"));
    assert_eq!(
        git(&setup.bare, &["rev-parse", "refs/heads/move-orders"]),
        git(setup.repo.path(), &["rev-parse", "HEAD"])
    );
}

#[test]
fn an_agent_without_the_key_is_refused_and_nothing_is_pushed() {
    let setup = setup();
    let agent = Agent::start(setup.dir.path(), None);
    assign_and_push(&setup, &agent, "move-orders")
        .failure()
        .stderr(predicate::str::contains(
            "the push of `move-orders` to `origin` was rejected: the remote refused every credential offered",
        ));
    assert!(!remote_has(&setup.bare, "move-orders"));
}

#[test]
fn an_unknown_host_key_is_refused_before_anything_is_sent() {
    let setup = setup();
    // The entry names another key for this host and port.
    let other = setup.dir.path().join("other_host");
    keypair(&other);
    let other_pub = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let key = other_pub.split_whitespace().nth(1).unwrap();
    std::fs::write(
        setup.home.join(".ssh/known_hosts"),
        format!("[127.0.0.1]:{} ssh-ed25519 {key}\n", setup.sshd.port),
    )
    .unwrap();
    let agent = Agent::start(setup.dir.path(), Some(&setup.user_key));
    assign_and_push(&setup, &agent, "move-orders")
        .failure()
        .stderr(predicate::str::contains(
            "invalid or unknown remote ssh hostkey",
        ));
    assert!(!remote_has(&setup.bare, "move-orders"));
}
