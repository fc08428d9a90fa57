//! Real Flux (source-controller and kustomize-controller of the pinned
//! release, each a process under its own ServiceAccount) deploying
//! Integrations whose manifests name their operator, as `kamel run -x … -o
//! yaml` writes them, next to the real upstream operators of this binary,
//! the owner admission policy and the owner-keys policy of
//! `examples/deploy/owner-keys`, with `reconciler sync` following its own
//! Git repository. The API server's audit log judges every write.

use std::time::{Duration, Instant};

use crate::NAME;
use crate::shared_operators;
use crate::support::*;
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::camel_k::{condition, phase};
use camelk_testkit::apps_repo::AppsRepo;
use camelk_testkit::flux::{self, FluxKind, KUSTOMIZE_CONTROLLER};
use kube::api::DynamicObject;

const APPS: &str = "apps";
const IMAGE: &str = "docker.io/library/camelk-e2e:1.0";
const NAMES: [&str; 3] = ["a-1", "a-2", "b-1"];
/// Flux reconciles this often, so it applies again during and after the
/// rollout, as it would in a cluster.
const FLUX_INTERVAL: Duration = Duration::from_secs(10);

/// An Integration as `kamel run -x … -o yaml` writes it and a team commits
/// it: the owner annotation naming operator-1, a prebuilt image.
fn kamel_manifest(name: &str, version: &str) -> String {
    format!(
        "apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: {name}
  annotations:
    {OPERATOR_ID_KEY}: operator-1
  labels:
    app.kubernetes.io/version: \"{version}\"
spec:
  traits:
    container:
      image: {IMAGE}
"
    )
}

/// The assignment: the upstream operators, the Integrations of `ns`, all
/// to `operator`, Ready required within 3 minutes.
fn assignment(ns: &str, operator: &str) -> String {
    upstream_fleet(NAME, ns, &OPERATORS, &[CamelKind::Integration])
        .default_operator(operator)
        .render()
}

/// Both owner keys name `id`, and `id` runs it, Ready.
fn ready_under(id: &str) -> impl Fn(&DynamicObject) -> bool + '_ {
    move |o| {
        let key = |map: &Option<std::collections::BTreeMap<String, String>>| {
            map.as_ref().and_then(|m| m.get(OPERATOR_ID_KEY)).cloned()
        };
        phase(o) == Some("Running")
            && condition(o, "Ready") == Some("True")
            && key(&o.metadata.labels).as_deref() == Some(id)
            && key(&o.metadata.annotations).as_deref() == Some(id)
    }
}

/// Waits, as [`wait_for`] does, until `check` holds for each Integration of
/// [`NAMES`].
async fn wait_for_each(
    admin: &kube::Client,
    ns: &str,
    timeout: Duration,
    what: &str,
    check: impl Fn(&DynamicObject) -> bool,
) {
    for name in NAMES {
        wait_for(admin, CamelKind::Integration, ns, name)
            .within(timeout)
            .until(what, &check)
            .await;
    }
}

/// Whether the reconciler co-owns both owner keys of `o`.
fn co_owned(o: &DynamicObject) -> bool {
    camelk_reconciler::camel_k::keys_co_owned(&o.metadata)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_moves_what_flux_deploys_with_owner_keys_and_flux_keeps_applying() {
    let cluster = camelk_testkit::shared();
    shared_operators(cluster).await;
    let (ns, admin) = policed_sync_namespace(cluster, "gitops-flux", &OPERATORS, None).await;
    camelk_testkit::admission::install_owner_keys_policy(&admin, &ns.name)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    // Flux deploys the apps repository, as its own ServiceAccount.
    let flux = flux::start_watching(cluster.dir(), &ns.name).await;
    let apps = AppsRepo::new();
    let files: Vec<(String, String)> = NAMES
        .iter()
        .map(|n| (format!("apps/{n}.yaml"), kamel_manifest(n, "1")))
        .collect();
    let first = apps.commit(&files, "three Integrations for operator-1");
    flux.deploy(&ns.name, APPS, &apps.url(), "./apps", FLUX_INTERVAL)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    flux.wait_commit_applied(&ns.name, APPS, &first, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", flux.log_tail(30)));
    wait_for_each(
        &admin,
        &ns.name,
        Duration::from_secs(240),
        "Running and Ready under operator-1 (as Flux created it)",
        camelk_testkit::scenario::ready_under("operator-1"),
    )
    .await;

    // The assignment says what the cluster holds: each Integration is
    // adopted (the label added) and its keys, which Flux applies, co-owned.
    let git = GitRemote::new();
    let rev1 = git.push(&assignment(&ns.name, "operator-1"), "operators");
    let sync = start_sync(cluster, &ns.name, &git, "reconciler", &[]);
    let synced = SyncedAssignment::new(&admin, &ns.name, NAME, &sync);
    synced.wait(120, "applied", applied(&rev1)).await;
    wait_for_each(
        &admin,
        &ns.name,
        Duration::from_secs(60),
        "adopted, its keys co-owned",
        |o| ready_under("operator-1")(o) && co_owned(o),
    )
    .await;

    // A rollout to operator-2, committed to the assignment's repository.
    let rev2 = git.push(
        &assignment(&ns.name, "operator-2"),
        "everything to operator-2",
    );
    let status = synced.wait(300, "applied", applied(&rev2)).await;
    assert!(
        status.rollout.is_some_and(|r| r.failing.is_empty()),
        "no resource failed the gate"
    );

    // Flux goes on: its own interval, then an unrelated commit (a label of
    // b-1, whose manifest still names operator-1) that it applies.
    let moved_at = Instant::now();
    let mut changed = files.clone();
    changed[2].1 = kamel_manifest("b-1", "2");
    let second = apps.commit(&changed, "b-1, version 2");
    flux.request_reconcile(FluxKind::GitRepository, &ns.name, APPS)
        .await
        .unwrap();
    flux.wait_commit_applied(&ns.name, APPS, &second, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", flux.log_tail(30)));
    wait_for(&admin, CamelKind::Integration, &ns.name, "b-1")
        .within(Duration::from_secs(60))
        .until("at version 2", |o| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/version"))
                .map(String::as_str)
                == Some("2")
        })
        .await;
    // At least two more of Flux's own reconciles after the move.
    let since_move = moved_at.elapsed();
    if since_move < 2 * FLUX_INTERVAL + Duration::from_secs(2) {
        tokio::time::sleep(2 * FLUX_INTERVAL + Duration::from_secs(2) - since_move).await;
    }

    // Every Integration ended where the assignment wants it, run by
    // operator-2; the Kustomization is Ready at the last commit.
    wait_for_each(
        &admin,
        &ns.name,
        Duration::from_secs(180),
        "Running and Ready under operator-2, both keys operator-2",
        ready_under("operator-2"),
    )
    .await;
    flux.wait_commit_applied(&ns.name, APPS, &second, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // The judges: no dual-owner write, no owner changed but by the
    // reconciler (Flux never set a key back), no owner annotation lost, and
    // no write of Flux's to a Camel K resource refused, dry runs included
    // (nothing of ours blocked it). Flux's writes to its own objects are left
    // out: a status patch of its Kustomization once met a 409 from Flux's own
    // optimistic lock, which nothing of ours takes part in.
    assert_single_owner(cluster, &ns.name);
    let events = cluster.audit_log().events_in(&ns.name).unwrap();
    let changes =
        camelk_testkit::audit::owner_changes_by_others(&events, &ns.name, &["reconciler"]);
    assert!(changes.is_empty(), "owner changes:\n{}", changes.join("\n"));
    let losses = camelk_testkit::audit::owner_annotation_losses(&events, &ns.name);
    assert!(losses.is_empty(), "owners lost:\n{}", losses.join("\n"));
    let flux_user = flux::service_account_user(KUSTOMIZE_CONTROLLER);
    let refused: Vec<String> = answered_requests(cluster, &ns.name, &flux_user)
        .iter()
        .filter(|e| matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete"))
        .filter(|e| {
            e.object_ref.as_ref().and_then(|o| o.api_group.as_deref()) == Some("camel.apache.org")
        })
        .filter(|e| e.code().is_some_and(|c| c >= 400))
        .map(|e| format!("{} {} -> {:?}", e.verb, e.request_uri, e.code()))
        .collect();
    assert!(
        refused.is_empty(),
        "Flux was refused:\n{}",
        refused.join("\n")
    );
    let flux_writes = answered_requests(cluster, &ns.name, &flux_user)
        .iter()
        .filter(|e| e.is_successful_write() && e.resource() == Some("integrations"))
        .count();
    assert!(
        flux_writes > NAMES.len(),
        "Flux created three and changed b-1"
    );

    for kind in [FluxKind::Kustomization, FluxKind::GitRepository] {
        flux.delete(kind, &ns.name, APPS, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
