//! `kubectl camelk sync [--wait]` against a real `reconciler sync` loop (run
//! in this process as the `reconciler` identity, following a real Git
//! repository) and real operator loops, on the real control plane.

use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorAssignment;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_testkit::manifest::Rollout;
use kube::api::{Api, DynamicObject};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use crate::common::start_sync;
use crate::common::{
    MANIFEST, admin_and_sync_namespace, follow, git, live_camelk, live_camelk_as, repo_with,
    start_operator, wait_for_line, wait_running,
};

pub(crate) const NAME: &str = "fleet";

/// Operators 1 and 2 locked in `ns`, the Integrations of `ns`, operator-1
/// by default; `staged` adds a move of everything to operator-2 in those steps.
pub(crate) fn manifest(ns: &str, staged: Option<&[&str]>) -> String {
    camelk_testkit::scenario::two_operators(NAME, ns, staged)
        // A pause between the steps, so that `sync --wait` started on a
        // loaded machine still sees the rollout in progress.
        .rollout(Rollout::new().gate_timeout("60s").pause("2s"))
        .drain_timeout("1m")
        .render()
}

pub(crate) async fn wait_applied(api: &Api<OperatorAssignment>, sha: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(object) = api.get(NAME).await
            && object.status.and_then(|s| s.last_applied_revision) == Some(sha.to_string())
        {
            return;
        }
        assert!(Instant::now() < deadline, "revision {sha} not applied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_wait_triggers_a_round_and_follows_the_rollout_to_its_end() {
    let cluster = camelk_testkit::shared();
    let (admin, ns) = admin_and_sync_namespace(cluster, "plugin-sync").await;
    let stop = CancellationToken::new();
    for id in ["operator-1", "operator-2"] {
        start_operator(cluster, id, &ns.name, &stop).await;
    }
    let integrations: Api<DynamicObject> =
        camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, &ns.name);
    let names = ["a", "b", "c", "d"];
    for name in names {
        crate::common::create_owned_integration(&integrations, name, "operator-1").await;
        wait_running(&integrations, name, "operator-1").await;
    }

    // The reconciler fetches once an hour: only a sync request makes it look sooner.
    let repo = repo_with(&manifest(&ns.name, None));
    let cache = tempfile::tempdir().unwrap();
    let sync_thread = start_sync(cluster, &ns.name, repo.path(), cache.path(), &stop, None).await;
    let assignments: Api<OperatorAssignment> = Api::namespaced(admin.clone(), &ns.name);
    wait_applied(
        &assignments,
        git(repo.path(), &["rev-parse", "HEAD"]).trim(),
    )
    .await;

    let staged = manifest(&ns.name, Some(&["50%", "100%"]));
    std::fs::write(repo.path().join(MANIFEST), staged).unwrap();
    git(
        repo.path(),
        &["commit", "-qam", "move everything to operator-2"],
    );
    let head = git(repo.path(), &["rev-parse", "HEAD"]).trim().to_string();
    let kubeconfig = cluster.kubeconfig();

    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &["sync", NAME, "--wait", "--timeout", "2m"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("operatorassignment {}/{NAME} synced", ns.name)),
        "{stdout}"
    );
    // Followed from the request's own write, so no stage is missed, however
    // fast the rollout.
    for stage in ["step 1/2", "step 2/2"] {
        assert!(
            stderr.contains(stage),
            "the rollout's {stage} is shown on stderr: {stderr}"
        );
    }
    // Returned only once the round handling this request was over.
    let status = assignments.get(NAME).await.unwrap().status.unwrap();
    assert_eq!(
        status.last_applied_revision.as_deref(),
        Some(head.as_str()),
        "{status:?}"
    );
    for name in names {
        let obj = integrations.get(name).await.unwrap();
        assert_eq!(
            obj.metadata.labels.unwrap().get(OPERATOR_ID_KEY).unwrap(),
            "operator-2",
            "{name}"
        );
    }

    // The reconciler's Events, as a cluster admin reads them: one Moved on
    // each moved Integration, and those of the rollout on the object.
    let out = live_camelk_as("admin", &kubeconfig, &ns.name)
        .arg("events")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    camelk_testkit::assert_success(&out, "events");
    assert!(table.starts_with("LAST SEEN"), "{table}");
    for name in names {
        assert!(
            table
                .lines()
                .any(|l| l.contains("Moved") && l.contains(&format!("integration/{name} "))),
            "no Moved Event for {name}:\n{table}"
        );
    }
    assert!(
        table.contains("StepMoved") && table.contains(&format!("operatorassignment/{NAME}")),
        "{table}"
    );
    let out = live_camelk_as("admin", &kubeconfig, &ns.name)
        .args(["events", "--for", "integration/a", "-o", "json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reasons: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["regarding"]["name"], "a", "{e}");
            e["reason"].as_str().unwrap()
        })
        .collect();
    assert_eq!(reasons, ["Moved"], "{listed:#}");
    // The running reconciler's version, from the status it wrote, beside the server's.
    let out = live_camelk(&kubeconfig, &ns.name, &["version"]);
    let text = String::from_utf8_lossy(&out.stdout);
    camelk_testkit::assert_success(&out, "version");
    let expected = format!(
        "Client Version: kubectl-camelk {v}\nServer Version: {server}\n\
         Reconciler Version: {v} ({ns}/{NAME})\n",
        v = env!("CARGO_PKG_VERSION"),
        server = camelk_testkit::binaries::pinned_kube_version(),
        ns = ns.name,
    );
    assert_eq!(text, expected);
    // -w follows: the Event and the status of the suspension below arrive while they run.
    let mut events = live_camelk_as("admin", &kubeconfig, &ns.name);
    let (mut events, event_lines) = follow(events.args(["events", "-w"]));
    let mut status = live_camelk_as("admin", &kubeconfig, &ns.name);
    let (mut status, status_lines) = follow(status.args(["status", NAME, "-w"]));

    // A suspended object does not sync: --wait says so and exits 1.
    let out = live_camelk(&kubeconfig, &ns.name, &["suspend", NAME]);
    assert!(out.status.success());
    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &["sync", NAME, "--wait", "--timeout", "1m", "-o", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result[0]["outcome"], "suspended", "{result}");
    wait_for_line(&event_lines, "events -w", |l| l.contains("Suspended"));
    // The condition row of the status printed again: `Suspended   True   Suspended   ...`.
    wait_for_line(&status_lines, "status -w", |l| {
        l.split_whitespace().take(2).eq(["Suspended", "True"])
    });
    for child in [&mut events, &mut status] {
        let _ = child.kill();
        let _ = child.wait();
    }

    // Without a reconciler to answer, --wait gives up at its timeout.
    stop.cancel();
    sync_thread.join().unwrap();
    let out = live_camelk(&kubeconfig, &ns.name, &["resume", NAME]);
    assert!(out.status.success());
    let out = live_camelk(
        &kubeconfig,
        &ns.name,
        &["sync", NAME, "--wait", "--timeout", "2s"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("timed out"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
