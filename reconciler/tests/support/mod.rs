//! Shared set-up of the operator and handoff end-to-end tests: RBAC for the
//! operator and coordinator identities, operator processes, Camel K objects,
//! and waiting for conditions.

#![allow(dead_code)]

use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY};
use camelk_reconciler::handoff::release::phase;
use camelk_testkit::TestCluster;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

pub const OPERATORS: [&str; 3] = ["operator-1", "operator-2", "operator-3"];
/// Short lock timing so expiry-driven tests take seconds.
pub const LEASE: Duration = Duration::from_secs(4);

/// Grants operator-1..3 the operator role and `reconciler` the coordinator role.
pub async fn grant_rbac(cluster: &TestCluster) {
    cluster.grant_camelk_roles().await;
}

/// A running `reconciler operator` process, killed when dropped.
pub struct OperatorProcess {
    pub id: String,
    pub child: Child,
    pub log: std::path::PathBuf,
}

impl OperatorProcess {
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }
    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal the operator");
    }
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        self.kill();
    }
}

/// Starts operator `id` (as the identity of the same name) watching `namespace`,
/// its lock in `namespace` too. `identity` tells replicas apart.
pub fn start_operator(
    cluster: &TestCluster,
    id: &str,
    namespace: &str,
    identity: &str,
    build_time: &str,
) -> OperatorProcess {
    let log = std::env::temp_dir().join(format!("camelk-e2e-{namespace}-{identity}.log"));
    let out = File::create(&log).expect("operator log");
    let child = Command::new(env!("CARGO_BIN_EXE_reconciler"))
        .args([
            "operator",
            "--id",
            id,
            "--namespace",
            namespace,
            "--lock-namespace",
            namespace,
        ])
        .args(["--identity", identity, "--build-time", build_time])
        .args([
            "--lease-duration",
            "4s",
            "--renew-deadline",
            "3s",
            "--retry-period",
            "1s",
            "--resync",
            "300ms",
        ])
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["--context", id])
        .env("RUST_LOG", "info,camelk_reconciler=debug")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start the reconciler binary");
    OperatorProcess {
        id: id.into(),
        child,
        log,
    }
}

pub fn camel_api(client: Client, kind: CamelKind, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client, ns, &kind.api_resource())
}

/// Creates an Integration owned (label and annotation) by `owner`.
pub async fn create_integration(
    client: &Client,
    ns: &str,
    name: &str,
    owner: Option<&str>,
) -> DynamicObject {
    let mut meta =
        json!({ "name": name, "labels": { "app": name }, "annotations": { "team": "shop" } });
    if let Some(o) = owner {
        meta["labels"][OPERATOR_ID_KEY] = json!(o);
        meta["annotations"][OPERATOR_ID_KEY] = json!(o);
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": CamelKind::Integration.api_version(),
        "kind": "Integration",
        "metadata": meta,
        "spec": { "sources": [{ "name": "route.yaml", "content": format!("- from: timer:{name}") }] }
    }))
    .unwrap();
    camel_api(client.clone(), CamelKind::Integration, ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating integration {name}: {e}"))
}

pub fn owner(obj: &DynamicObject) -> Option<String> {
    obj.metadata.labels.as_ref()?.get(OPERATOR_ID_KEY).cloned()
}

/// Polls `kind ns/name` until `check` holds, or panics after `timeout` with `what`.
pub async fn wait_for(
    client: &Client,
    kind: CamelKind,
    ns: &str,
    name: &str,
    timeout: Duration,
    what: &str,
    check: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let api = camel_api(client.clone(), kind, ns);
    let deadline = Instant::now() + timeout;
    loop {
        let last = api.get_opt(name).await.unwrap();
        if let Some(obj) = &last
            && check(obj)
        {
            return obj.clone();
        }
        if Instant::now() > deadline {
            panic!(
                "{kind} {ns}/{name}: not {what} after {timeout:?}; last seen: phase {:?}, owner {:?}",
                last.as_ref().and_then(|o| phase(o).map(str::to_string)),
                last.as_ref().and_then(owner)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn in_phase<'a>(p: &'a str) -> impl Fn(&DynamicObject) -> bool + 'a {
    move |o| phase(o) == Some(p)
}

/// The audit-log judge for one test namespace: no successful write to a Camel
/// K resource by an operator that did not own it at that moment.
pub fn assert_single_owner(cluster: &TestCluster, ns: &str) {
    let events = cluster.audit_log().events_in(ns).unwrap();
    let violations = camelk_testkit::audit::single_owner_violations(&events, ns, &OPERATORS);
    assert!(
        violations.is_empty(),
        "dual-owner writes:\n{}",
        violations.join("\n")
    );
}

/// Running under operator `id`, from a kit that operator built.
pub fn running_under(id: &str) -> impl Fn(&DynamicObject) -> bool + '_ {
    move |o| {
        phase(o) == Some("Running")
            && owner(o).as_deref() == Some(id)
            && camelk_reconciler::handoff::release::kit_name(o)
                .is_some_and(|k| k.ends_with(&format!("-kit-{id}")))
    }
}
