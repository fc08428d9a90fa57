//! An apps repository whose manifests name their operator, applied by real
//! Flux (source- and kustomize-controller of the pinned release, under their
//! own ServiceAccounts), beside two real upstream Camel K operators and the
//! owner admission policy, with no owner-keys policy: what `plan`, `check`
//! and `get` say of it, and its cleanup with `kubectl camelk
//! strip-owner-keys`, after which a move works. The API server's audit log
//! judges that no resource was ever without an owner.

mod common;

use std::time::{Duration, Instant};

use camelk_reconciler::api::{OperatorAssignment, OperatorAssignmentStatus};
use camelk_reconciler::camel_k::phase;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_testkit::apps_repo::AppsRepo;
use camelk_testkit::flux::{self, FluxKind, KUSTOMIZE_CONTROLLER};
use camelk_testkit::scenario::ready_under;
use kube::api::{Api, DynamicObject};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use common::{admin_with_crd, git, live_camelk, live_camelk_as, repo_with, start_sync};

const NAME: &str = "fleet";
const OPERATORS: [&str; 2] = ["operator-1", "operator-2"];
const NAMES: [&str; 2] = ["a-1", "a-2"];
const IMAGE: &str = "docker.io/library/camelk-e2e:1.0";
const FLUX_INTERVAL: Duration = Duration::from_secs(10);

/// An Integration as `kamel run -x … -o yaml` writes it: the owner
/// annotation naming operator-1, a prebuilt image.
fn kamel_manifest(name: &str) -> String {
    format!(
        "apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: {name}
  # who runs it
  annotations:
    {OPERATOR_ID_KEY}: operator-1
spec:
  traits:
    container:
      image: {IMAGE}
"
    )
}

/// The assignment: both upstream operators, the Integrations of `ns`, all
/// to `operator`.
fn assignment(ns: &str, operator: &str) -> String {
    camelk_testkit::scenario::upstream_fleet(NAME, ns, &OPERATORS, &[CamelKind::Integration])
        .default_operator(operator)
        .render()
}

fn json_out(out: &std::process::Output) -> Value {
    camelk_testkit::assert_success(out, "the plugin");
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn wait_until(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    common::poll_until(api, name, what, timeout, check, |obj| {
        format!(
            "metadata {:?}; managed fields {}; phase {:?}",
            (&obj.metadata.labels, &obj.metadata.annotations),
            serde_json::to_string(&obj.metadata.managed_fields).unwrap_or_default(),
            phase(obj)
        )
    })
    .await
}

async fn status_until(
    api: &Api<OperatorAssignment>,
    what: &str,
    check: impl Fn(&OperatorAssignmentStatus) -> bool,
) -> OperatorAssignmentStatus {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let status = api.get(NAME).await.ok().and_then(|o| o.status);
        if let Some(s) = &status
            && check(s)
        {
            return s.clone();
        }
        assert!(Instant::now() < deadline, "status not {what}: {status:#?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_repository_is_cleaned_of_owner_keys_with_no_resource_ever_unowned() {
    let cluster = camelk_testkit::shared();
    let admin = admin_with_crd(cluster).await;
    let operators =
        camelk_testkit::scenario::ready_upstream_operators(cluster, &["operator-1", "operator-2"])
            .await;
    let ns = cluster.namespace("gitops-cleanup").await;
    cluster.grant_sync_namespace(&ns.name).await;
    camelk_testkit::admission::enforce_in(&admin, &ns.name, &["reconciler"], &OPERATORS)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let integrations: Api<DynamicObject> =
        camelk_testkit::scenario::camel_api(admin.clone(), CamelKind::Integration, &ns.name);

    // Flux deploys Integrations whose manifests name operator-1.
    let flux = flux::start_watching(cluster.dir(), &ns.name).await;
    let apps = AppsRepo::new();
    let files: Vec<(String, String)> = NAMES
        .iter()
        .map(|n| (format!("apps/{n}.yaml"), kamel_manifest(n)))
        .collect();
    let first = apps.commit(&files, "two Integrations for operator-1");
    flux.deploy(&ns.name, "apps", &apps.url(), "./apps", FLUX_INTERVAL)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    flux.wait_commit_applied(&ns.name, "apps", &first, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", flux.log_tail(30)));
    for name in NAMES {
        wait_until(
            &integrations,
            name,
            "Running and Ready under operator-1",
            Duration::from_secs(240),
            ready_under("operator-1"),
        )
        .await;
    }

    // The assignment wants them on operator-2, while Flux applies their
    // annotation: the plan blocks the moves, naming Flux and the fix.
    let repo = repo_with(&assignment(&ns.name, "operator-2"));
    let kubeconfig = cluster.kubeconfig();
    let plan = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .current_dir(repo.path())
        .args(["plan", "-o", "json"])
        .output()
        .unwrap();
    let plan = json_out(&plan);
    let blocked = plan["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), NAMES.len(), "{plan:#}");
    for b in blocked {
        assert_eq!(b["why"]["reason"], "keysApplied", "{b:#}");
        assert_eq!(b["why"]["applier"], KUSTOMIZE_CONTROLLER, "{b:#}");
    }
    assert_eq!(plan["batches"].as_array().map(Vec::len), Some(0));

    // The sync adopts them (the label, which Flux does not apply), co-owns
    // their keys, and pauses naming Flux instead of moving them.
    let stop = CancellationToken::new();
    let cache = tempfile::tempdir().unwrap();
    let sync = start_sync(cluster, &ns.name, repo.path(), cache.path(), &stop, None).await;
    let assignments: Api<OperatorAssignment> = Api::namespaced(admin.clone(), &ns.name);
    let status = status_until(&assignments, "stalled on Flux's keys", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True" && c.reason == "OwnerKeysApplied")
    })
    .await;
    let stalled = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap();
    assert!(
        stalled.message.contains("a-1") && stalled.message.contains(KUSTOMIZE_CONTROLLER),
        "{}",
        stalled.message
    );
    for name in NAMES {
        wait_until(
            &integrations,
            name,
            "adopted and co-owned, still with operator-1",
            Duration::from_secs(60),
            |o| {
                ready_under("operator-1")(o)
                    && camelk_reconciler::camel_k::keys_co_owned(&o.metadata)
            },
        )
        .await;
    }
    let get = live_camelk(&kubeconfig, &ns.name, &["get", "integration", "-o", "wide"]);
    let table = String::from_utf8_lossy(&get.stdout);
    for name in NAMES {
        let row = table.lines().find(|l| l.contains(name)).unwrap();
        assert!(
            row.contains("kustomize-controller (co-owned)"),
            "get -o wide names the applier: {table}"
        );
    }
    let check = live_camelk(&kubeconfig, &ns.name, &["check", "-o", "json"]);
    let check: Value = serde_json::from_slice(&check.stdout).unwrap();
    let finding = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["part"] == "Owner keys"
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("applied by kustomize-controller"))
        })
        .unwrap_or_else(|| panic!("check names the applier: {check:#}"));
    assert!(
        finding["fix"]
            .as_str()
            .is_some_and(|f| f.contains("strip-owner-keys")),
        "{finding:#}"
    );

    // The cleanup: the plugin removes the keys on a branch, and says no
    // resource changes owner; merged, Flux applies manifests without them.
    let strip = live_camelk_as("reconciler", &kubeconfig, &ns.name)
        .current_dir(apps.work())
        .args(["strip-owner-keys", "apps", "--branch", "strip"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&strip.stdout);
    assert!(
        strip.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&strip.stderr)
    );
    assert!(
        stdout.contains("2 keys removed from 2 files; 0 resources change owner"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("stays with operator-1").count(),
        NAMES.len(),
        "{stdout}"
    );
    let cleaned = apps.push("strip");
    let diff = git(&apps.work(), &["diff", &first, &cleaned]);
    let changed = |sign: char| -> Vec<&str> {
        diff.lines()
            .filter(|l| l.starts_with(sign) && !l.starts_with("---") && !l.starts_with("+++"))
            .collect()
    };
    assert!(
        changed('-').iter().all(|l| l.contains(OPERATOR_ID_KEY))
            && changed('+')
                .iter()
                .all(|l| l.contains("camelk.dev/owner-keys: reconciler")),
        "only the keys left the manifests, the marker in their place:\n{diff}"
    );
    flux.request_reconcile(FluxKind::GitRepository, &ns.name, "apps")
        .await
        .unwrap();
    flux.wait_commit_applied(&ns.name, "apps", &cleaned, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", flux.log_tail(30)));

    // Flux no longer applies the keys, the co-owner kept them, and the move
    // the assignment wanted now goes through, and stays through Flux's
    // next applies.
    let moved = tokio::time::timeout(Duration::from_secs(240), async {
        for name in NAMES {
            while !ready_under("operator-2")(&integrations.get(name).await.unwrap()) {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    })
    .await;
    if moved.is_err() {
        // Seen once under load: both with operator-2, `Building Kit` after
        // 240 s. Their status and the operators' logs say why.
        let status = assignments.get(NAME).await.unwrap().status;
        let mut statuses = String::new();
        for name in NAMES {
            let object = integrations.get(name).await.unwrap();
            statuses += &format!("\n{name}: {:#}", object.data["status"]);
        }
        let logs: Vec<String> = operators
            .iter()
            .map(|o| format!("{}:\n{}", o.id(), o.log_tail(40)))
            .collect();
        panic!(
            "not moved to operator-2 after the cleanup; the assignment's status: {status:#?}\n\
             the Integrations' status:{statuses}\n{}",
            logs.join("\n")
        );
    }
    for name in NAMES {
        wait_until(
            &integrations,
            name,
            "moved to operator-2, Running and Ready",
            Duration::from_secs(240),
            ready_under("operator-2"),
        )
        .await;
    }
    tokio::time::sleep(2 * FLUX_INTERVAL + Duration::from_secs(2)).await;
    for name in NAMES {
        let obj = integrations.get(name).await.unwrap();
        assert!(ready_under("operator-2")(&obj), "{name} stayed moved");
    }
    let get = live_camelk(&kubeconfig, &ns.name, &["get", "integration", "-o", "json"]);
    for item in json_out(&get)["items"].as_array().unwrap() {
        assert_eq!(item["annotationAppliedBy"], Value::Null, "{item:#}");
        assert_eq!(item["operator"], "operator-2", "{item:#}");
    }

    // The judges: never an owner annotation lost, no dual-owner write, no
    // owner changed but by the reconciler.
    let events = cluster.audit_log().events_in(&ns.name).unwrap();
    let losses = camelk_testkit::audit::owner_annotation_losses(&events, &ns.name);
    assert!(losses.is_empty(), "owners lost:\n{}", losses.join("\n"));
    let violations = camelk_testkit::audit::single_owner_violations(&events, &ns.name, &OPERATORS);
    assert!(
        violations.is_empty(),
        "dual-owner writes:\n{}",
        violations.join("\n")
    );
    let changes =
        camelk_testkit::audit::owner_changes_by_others(&events, &ns.name, &["reconciler"]);
    assert!(changes.is_empty(), "owner changes:\n{}", changes.join("\n"));

    stop.cancel();
    sync.join().unwrap();
    for kind in [FluxKind::Kustomization, FluxKind::GitRepository] {
        flux.delete(kind, &ns.name, "apps", Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
