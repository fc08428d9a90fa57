//! The demo's Camel K resources in its apps namespace: created as `kamel`
//! creates them, their owners, and waiting until they all run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use camelk_reconciler::camel_k::{CamelKind, OPERATOR_ID_KEY, owner_id};
use camelk_reconciler::camel_k::{condition, phase};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::rollout::assignment_status;
use crate::{APPS, PIPES, SERVICES};

fn camel(client: &Client, kind: CamelKind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), APPS, &kind.api_resource())
}

/// The image an app runs: built elsewhere (CI), so the operator skips the
/// build. Nothing pulls it: the simulated node only reports its pods running.
pub(crate) fn image(name: &str) -> String {
    format!("registry.shop.invalid/{name}:1.0")
}

/// Integrations as `kamel run -x OPERATOR --image IMAGE` creates them
/// (orders and services for operator-1, a canary for operator-2), and Pipes
/// as `kamel bind -x operator-1 timer:tick log:info --trait
/// container.image=IMAGE` does: the owner annotation only. A Pipe's
/// Integration would otherwise need a Maven build, which cannot run here and
/// ends in `Error`; with the image it runs, and the Pipe becomes `Ready`, so
/// the health gate judges Pipes as it judges Integrations.
pub(crate) async fn create_resources(admin: &Client) -> anyhow::Result<Vec<String>> {
    let mut apps = vec![
        ("orders".to_string(), "operator-1"),
        ("canary-checkout".to_string(), "operator-2"),
    ];
    apps.extend((1..=SERVICES).map(|i| (format!("svc-{i:02}"), "operator-1")));
    for (name, owner) in &apps {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Integration.api_version(),
            "kind": "Integration",
            "metadata": { "name": name, "annotations": { OPERATOR_ID_KEY: owner } },
            "spec": { "traits": { "container": { "image": image(name) } } }
        }))?;
        camel(admin, CamelKind::Integration)
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating Integration {name}"))?;
    }
    for i in 1..=PIPES {
        let name = format!("pipe-{i:02}");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": CamelKind::Pipe.api_version(),
            "kind": "Pipe",
            "metadata": {
                "name": name,
                "annotations": {
                    OPERATOR_ID_KEY: "operator-1",
                    "trait.camel.apache.org/container.image": image(&name),
                },
            },
            "spec": {
                "source": { "uri": format!("timer:tick-{i}") },
                "sink": { "uri": "log:info" }
            }
        }))?;
        camel(admin, CamelKind::Pipe)
            .create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating Pipe {name}"))?;
    }
    Ok(apps.into_iter().map(|(name, _)| name).collect())
}

/// Owner (label, else annotation) of every Integration and Pipe in the demo namespace.
pub(crate) async fn owners(
    admin: &Client,
) -> anyhow::Result<BTreeMap<(CamelKind, String), Option<String>>> {
    let mut out = BTreeMap::new();
    for kind in [CamelKind::Integration, CamelKind::Pipe] {
        for obj in camel(admin, kind)
            .list_metadata(&ListParams::default())
            .await?
        {
            let owner = owner_id(&obj.metadata);
            out.insert((kind, obj.metadata.name.unwrap_or_default()), owner);
        }
    }
    Ok(out)
}

pub(crate) fn counts(
    owners: &BTreeMap<(CamelKind, String), Option<String>>,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for owner in owners.values() {
        *counts
            .entry(owner.clone().unwrap_or_else(|| "nobody".into()))
            .or_default() += 1;
    }
    counts
}

pub(crate) fn describe_counts(owners: &BTreeMap<(CamelKind, String), Option<String>>) -> String {
    let pipes = owners.keys().filter(|(k, _)| *k == CamelKind::Pipe).count();
    let from_pipes = owners.len() - pipes;
    let by_owner = counts(owners)
        .iter()
        .map(|(o, n)| format!("{n} with {o}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{by_owner} ({from_pipes} Integrations, {pipes} Pipes)")
}

/// Until every Integration runs with `Ready=True` and every Pipe is `Ready`;
/// with `rev`, also until `rev` is applied and every resource carries the
/// owner label (adopted).
pub(crate) async fn wait_all_running(
    admin: &Client,
    rev: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    let mut printed = Instant::now()
        .checked_sub(Duration::from_secs(1))
        .unwrap_or_else(Instant::now);
    loop {
        let applied = match rev {
            Some(rev) => {
                assignment_status(admin)
                    .await?
                    .and_then(|s| s.last_applied_revision)
                    .as_deref()
                    == Some(rev)
            }
            None => true,
        };
        let mut total = 0;
        let mut ready = 0;
        let mut labelled = 0;
        let mut phases: BTreeMap<String, usize> = BTreeMap::new();
        for kind in [CamelKind::Integration, CamelKind::Pipe] {
            for obj in camel(admin, kind).list(&ListParams::default()).await? {
                total += 1;
                let p = phase(&obj).unwrap_or("").to_string();
                let ok = match kind {
                    CamelKind::Integration => {
                        p == "Running" && condition(&obj, "Ready") == Some("True")
                    }
                    _ => p == "Ready",
                };
                if !ok {
                    let key = if p.is_empty() { "no phase".into() } else { p };
                    *phases.entry(format!("{} {key}", kind.kind())).or_default() += 1;
                }
                ready += usize::from(ok);
                labelled += usize::from(
                    obj.labels()
                        .get(OPERATOR_ID_KEY)
                        .is_some_and(|l| Some(l) == obj.annotations().get(OPERATOR_ID_KEY)),
                );
            }
        }
        let waiting = phases
            .iter()
            .map(|(p, n)| format!("{n} {p}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut line = format!("  {ready}/{total} running and ready");
        if rev.is_some() {
            line.push_str(&format!(", {labelled}/{total} adopted"));
        }
        if !waiting.is_empty() {
            line.push_str(&format!("  (not yet: {waiting})"));
        }
        let adopted = rev.is_none() || labelled == total;
        let done = applied && adopted && total > 0 && ready == total;
        if line != last && (done || printed.elapsed() >= Duration::from_secs(1)) {
            println!("{line}");
            last = line;
            printed = Instant::now();
        }
        if done {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("resources not all running after {timeout:?} ({ready}/{total})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A cluster admin handing an Integration of operator-2 back to operator-1
/// by hand is refused by the admission policy (the demo fails if it is not).
pub(crate) async fn hand_edit_is_refused(admin: &Client) -> anyhow::Result<()> {
    let owners = owners(admin).await?;
    let Some(((_, name), _)) = owners.iter().find(|((kind, _), owner)| {
        *kind == CamelKind::Integration && owner.as_deref() == Some("operator-2")
    }) else {
        bail!("no Integration with operator-2 to relabel");
    };
    println!(
        "\n$ kubectl --context admin -n {APPS} label integration/{name} {OPERATOR_ID_KEY}=operator-1 --overwrite"
    );
    let patch = json!({ "metadata": { "labels": { OPERATOR_ID_KEY: "operator-1" } } });
    match camel(admin, CamelKind::Integration)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            println!("Error from server (Forbidden): {}", status.message);
            Ok(())
        }
        Ok(_) => bail!("the admission policy let a hand edit of {name}'s owner through"),
        Err(e) => Err(e).context("relabelling by hand"),
    }
}
