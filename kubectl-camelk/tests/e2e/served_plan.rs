//! `kubectl camelk plan --server`: the plan the reconciler serves from its
//! watch cache (`GET /plan`) against the plan computed here from the
//! cluster, on the real control plane, and the endpoint's bearer token.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use camelk_reconciler::api::OperatorAssignment;
use camelk_reconciler::camel_k::CamelKind;
use kube::api::{Api, DynamicObject};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::common::{MANIFEST, camelk, git, live_camelk_as, repo_with};
use crate::live_sync::{manifest, start_sync, wait_applied};

const TOKEN: &str = "plan-token-0123456789";

fn json_of(out: &std::process::Output, what: &str) -> Value {
    camelk_testkit::assert_success(out, what);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The status line of a plain `GET path` on `addr`, with no credentials.
fn status_line(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

/// The set-up both tests share: Integrations a..d owned by operator-1 in a
/// namespace of their own (running under it when `operators`), a repository
/// whose `main` keeps them there and whose branch `feature` moves them all to
/// operator-2 in two steps, and a sync following `main`, applied, serving
/// `GET /plan` with [`TOKEN`].
struct PullRequest {
    ns: camelk_testkit::TestNamespace,
    admin: kube::Client,
    repo: tempfile::TempDir,
    /// The commit of `feature`.
    head_sha: String,
    addr: std::net::SocketAddr,
    url: String,
    token_file: std::path::PathBuf,
    scratch: tempfile::TempDir,
    stop: CancellationToken,
    sync: Option<std::thread::JoinHandle<()>>,
}

impl PullRequest {
    async fn open(cluster: &camelk_testkit::TestCluster, prefix: &str, operators: bool) -> Self {
        let (admin, ns) = crate::common::admin_and_sync_namespace(cluster, prefix).await;
        let stop = CancellationToken::new();
        if operators {
            for id in ["operator-1", "operator-2"] {
                crate::common::start_operator(cluster, id, &ns.name, &stop).await;
            }
        }
        let integrations: Api<DynamicObject> =
            camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, &ns.name);
        for name in ["a", "b", "c", "d"] {
            crate::common::create_owned_integration(&integrations, name, "operator-1").await;
            if operators {
                crate::common::wait_running(&integrations, name, "operator-1").await;
            }
        }

        let repo = repo_with(&manifest(&ns.name, None));
        git(repo.path(), &["checkout", "-qb", "feature"]);
        std::fs::write(
            repo.path().join(MANIFEST),
            manifest(&ns.name, Some(&["50%", "100%"])),
        )
        .unwrap();
        git(
            repo.path(),
            &["commit", "-qam", "move everything to operator-2"],
        );
        let head_sha = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_string();
        git(repo.path(), &["checkout", "-q", "main"]);

        let scratch = tempfile::tempdir().unwrap();
        let token_file = scratch.path().join("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sync = start_sync(
            cluster,
            &ns.name,
            repo.path(),
            &scratch.path().join("cache"),
            &stop,
            Some((listener, token_file.clone())),
        )
        .await;
        let assignments: Api<OperatorAssignment> = Api::namespaced(admin.clone(), &ns.name);
        wait_applied(
            &assignments,
            git(repo.path(), &["rev-parse", "main"]).trim(),
        )
        .await;
        PullRequest {
            ns,
            admin,
            repo,
            head_sha,
            addr,
            url: format!("http://{addr}"),
            token_file,
            scratch,
            stop,
            sync: Some(sync),
        }
    }
}

impl Drop for PullRequest {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(sync) = self.sync.take() {
            let _ = sync.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_plan_equals_the_local_plan_and_needs_the_token() {
    let cluster = camelk_testkit::shared();
    let pr = PullRequest::open(cluster, "served-plan", false).await;
    let (ns, repo, head_sha, url, addr) = (&pr.ns, &pr.repo, &pr.head_sha, &pr.url, pr.addr);
    let token_file = &pr.token_file;

    let kubeconfig = cluster.kubeconfig();
    let local = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .current_dir(repo.path())
        .args(["plan", "--base", "main", "--head", "feature", "-o", "json"])
        .output()
        .unwrap();
    let local = json_of(&local, "plan --base main --head feature");
    assert_eq!(
        local["batches"].as_array().map(Vec::len),
        Some(2),
        "two steps: {local:#}"
    );
    // With a restart forecast for each moved Integration (none runs here:
    // no Deployment, no pods to roll), which the served plan carries too.
    let restarts = local["restarts"].as_array().expect("a restart forecast");
    assert_eq!(restarts.len(), 4, "{local:#}");
    assert!(restarts.iter().all(|r| r["rolls"] == false), "{local:#}");

    let elsewhere = tempfile::tempdir().unwrap();
    let served = |head: &str, token: &str| {
        camelk(elsewhere.path())
            .args(["-n", &ns.name, "plan", "--server", url])
            .args(["--base", "main", "--head", head, "-o", "json"])
            .env("CAMELK_PLAN_TOKEN", token)
            .output()
            .unwrap()
    };
    let by_branch = json_of(&served("feature", TOKEN), "plan --server, head a branch");
    assert_eq!(by_branch, local, "served and local plans differ");
    let by_sha = json_of(&served(head_sha, TOKEN), "plan --server, head a SHA");
    assert_eq!(by_sha, local);
    let from_file = camelk(elsewhere.path())
        .args(["-n", &ns.name, "plan", "--server", url, "--token-file"])
        .arg(token_file)
        .args(["--base", "main", "--head", "feature", "-o", "markdown"])
        // Small enough to leave rows out, and say how to see them all.
        .args(["--max-bytes", "500"])
        .output()
        .unwrap();
    camelk_testkit::assert_success(&from_file, "plan --server -o markdown");
    let comment = String::from_utf8(from_file.stdout).unwrap();
    assert!(
        comment.contains(&format!(
            "kubectl-camelk:plan {} -->",
            crate::live_sync::NAME
        )),
        "the comment's marker names the assignment:\n{comment}"
    );
    assert!(comment.contains(&format!("--server {url}")), "{comment}");

    // Refused: a wrong token, no token, an unknown branch, a revision that
    // is not one.
    let wrong = served("feature", "not-the-token");
    assert_eq!(wrong.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("wrong bearer token"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(TOKEN),
        "the token is never shown: {stderr}"
    );
    assert!(
        status_line(addr, "/plan?head=feature").contains(" 401 "),
        "without a token"
    );
    let unknown = served("no-such-branch", TOKEN);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && stderr.contains("404"),
        "{stderr}"
    );
    let invalid = served("main..feature", TOKEN);
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert!(
        !invalid.status.success() && stderr.contains("400") && stderr.contains("not a revision"),
        "{stderr}"
    );
}

/// Every move of a plan as JSON, as (name, from, to), sorted.
fn plan_moves(plan: &Value) -> Vec<(String, String, String)> {
    let mut moves = crate::live::moves_of(plan);
    moves.sort();
    moves
}

/// The pull-request workflow end to end: the CI script (ci/plan-comment.sh)
/// comments the plan from the reconciler's endpoint with no kubeconfig; after
/// the merge the reconciler executes exactly those moves; `history` lists
/// the migration and its moves; `revert` of it plans the moves back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_is_commented_executed_listed_and_reverted() {
    let cluster = camelk_testkit::shared();
    let pr = PullRequest::open(cluster, "pr-flow", true).await;
    let (ns, repo, head_sha, url, scratch) = (&pr.ns, &pr.repo, &pr.head_sha, &pr.url, &pr.scratch);
    let assignments: Api<OperatorAssignment> = Api::namespaced(pr.admin.clone(), &ns.name);

    // The CI job: a checkout of the head, the plugin on PATH, no kubeconfig.
    let job = scratch.path().join("job");
    git(
        scratch.path(),
        &[
            "clone",
            "-q",
            "--branch",
            "feature",
            &repo.path().display().to_string(),
            "job",
        ],
    );
    let plugin_dir = Path::new(env!("CARGO_BIN_EXE_kubectl-camelk"))
        .parent()
        .unwrap();
    let path = camelk_testkit::path_with(&[plugin_dir]);
    let script = camelk_testkit::workspace_root().join("ci/plan-comment.sh");
    let ci = Command::new("bash")
        .arg(&script)
        .current_dir(&job)
        .env("PATH", &path)
        .env("KUBECONFIG", job.join("no-kubeconfig"))
        .env("CAMELK_BASE", "main")
        .env("CAMELK_HEAD", head_sha)
        .env("CAMELK_PLAN_SERVER", url)
        .env("CAMELK_PLAN_TOKEN", TOKEN)
        .env("CAMELK_NAMESPACE", &ns.name)
        .env("CAMELK_FAIL_ON_BLOCKED", "true")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        ci.status.success(),
        "the CI script failed:\n{}\n{}",
        String::from_utf8_lossy(&ci.stdout),
        String::from_utf8_lossy(&ci.stderr)
    );
    let comment = std::fs::read_to_string(job.join("camelk-plan.md")).unwrap();
    assert!(
        comment.starts_with("<!-- kubectl-camelk:plan fleet -->"),
        "{comment}"
    );
    assert!(comment.contains("4 moves in 2 batches"), "{comment}");
    let served = camelk(&job)
        .args(["-n", &ns.name, "plan", "--server", url, "--base", "main"])
        .args(["--head", head_sha, "-o", "json"])
        .env("CAMELK_PLAN_TOKEN", TOKEN)
        .output()
        .unwrap();
    let commented = plan_moves(&json_of(&served, "plan --server"));
    for (name, from, to) in &commented {
        assert!(
            comment.contains(&format!("| {} | {name} | {from} | {to} |", ns.name)),
            "{name} {from} -> {to} in:\n{comment}"
        );
    }

    // Merged: the reconciler executes it.
    git(repo.path(), &["merge", "-q", "--ff-only", "feature"]);
    let kubeconfig = cluster.kubeconfig();
    let synced = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .args(["sync", crate::live_sync::NAME, "--wait", "--timeout", "3m"])
        .output()
        .unwrap();
    camelk_testkit::assert_success(&synced, "sync --wait");
    wait_applied(&assignments, head_sha).await;

    // The history lists the migration; its moves are the commented ones (as
    // a platform admin reads them: Events in the tenant namespaces).
    let history = live_camelk_as("admin", &kubeconfig, &ns.name)
        .args(["history", "-o", "json"])
        .output()
        .unwrap();
    let history = json_of(&history, "history");
    let row = history
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["revision"] == head_sha.as_str())
        .unwrap_or_else(|| panic!("{head_sha} not in the history: {history:#}"));
    assert_eq!(row["result"], "Succeeded", "{row:#}");
    assert_eq!(row["message"], "move everything to operator-2");
    assert_eq!(row["moves"], 4);
    let table = live_camelk_as("admin", &kubeconfig, &ns.name)
        .arg("history")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains(&head_sha[..12]));
    let executed = live_camelk_as("admin", &kubeconfig, &ns.name)
        .args(["history", "--revision", &head_sha[..12], "-o", "json"])
        .output()
        .unwrap();
    let executed = json_of(&executed, "history --revision");
    let text = |v: &Value| v.as_str().unwrap().to_string();
    let mut executed: Vec<(String, String, String)> = executed["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (text(&m["name"]), text(&m["from"]), text(&m["to"])))
        .collect();
    executed.sort();
    assert_eq!(
        executed, commented,
        "executed moves differ from the comment"
    );

    // Reverting the merged change (a commit on a branch of its own, as a
    // pull request would carry it) plans exactly the moves back.
    git(repo.path(), &["config", "user.name", "t"]);
    git(repo.path(), &["config", "user.email", "t@example.com"]);
    let reverted = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .current_dir(repo.path())
        .args(["revert", head_sha, "--branch", "undo-move"])
        .output()
        .unwrap();
    camelk_testkit::assert_success(&reverted, "revert");
    let back = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .current_dir(repo.path())
        .args(crate::common::words(
            "plan --base main --head undo-move -o json",
        ))
        .output()
        .unwrap();
    let back = plan_moves(&json_of(&back, "plan of the revert"));
    let expected: Vec<_> = commented
        .iter()
        .map(|(name, from, to)| (name.clone(), to.clone(), from.clone()))
        .collect();
    assert_eq!(back, expected);
}
