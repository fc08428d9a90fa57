//! Commands on the `OperatorAssignment` objects `reconciler sync` acts on:
//! `status` (what it reports), `suspend` and `resume`.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use camelk_reconciler::preflight::Crd;
use kube::api::Api;
use serde_json::json;

use super::ownership::object_kind;
use crate::cli::{Cli, NameArgs, Output, StatusArgs};
use crate::render;

pub async fn status(cli: &Cli, args: &StatusArgs) -> anyhow::Result<()> {
    use camelk_reconciler::api::OperatorAssignment;
    let (client, default_ns) = super::cluster(cli).await?;
    super::require_crds(&client, &super::ASSIGNMENT_CRDS, &[]).await?;
    let api: Api<OperatorAssignment> = if cli.all_namespaces {
        Api::all(client)
    } else {
        Api::namespaced(client, &cli.namespace.clone().unwrap_or(default_ns))
    };
    let items = match &args.name {
        Some(name) => vec![
            api.get(name)
                .await
                .with_context(|| format!("reading OperatorAssignment {name}"))?,
        ],
        None => {
            api.list(&Default::default())
                .await
                .context("listing OperatorAssignments")?
                .items
        }
    };
    if cli.output.is_structured() {
        let out: Vec<_> = items
            .iter()
            .map(|a| json!({ "namespace": a.metadata.namespace, "name": a.metadata.name, "generation": a.metadata.generation, "status": a.status }))
            .collect();
        print!(
            "{}",
            render::structured(&json!({ "items": out }), cli.output)
        );
        return Ok(());
    }
    if cli.output == Output::Name {
        let kind = object_kind(
            Crd::OperatorAssignment.kind(),
            Crd::OperatorAssignment.group(),
        );
        for a in &items {
            println!("{kind}/{}", a.metadata.name.as_deref().unwrap_or_default());
        }
        return Ok(());
    }
    if items.is_empty() {
        println!("no OperatorAssignment found");
    }
    for a in &items {
        print!("{}", render::assignment_status(a));
    }
    if args.watch {
        follow_status(&api, args.name.as_deref(), &items).await?;
    }
    Ok(())
}

/// `status -w`: the status again each time an OperatorAssignment (the named
/// one, or any in the namespace) changes, until interrupted.
async fn follow_status(
    api: &Api<camelk_reconciler::api::OperatorAssignment>,
    name: Option<&str>,
    shown: &[camelk_reconciler::api::OperatorAssignment],
) -> anyhow::Result<()> {
    use futures::TryStreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let mut config = watcher::Config::default();
    if let Some(name) = name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    // What was printed last per object, so a relist prints nothing twice.
    let mut printed: BTreeMap<String, Option<String>> = shown
        .iter()
        .map(|a| {
            (
                a.metadata.name.clone().unwrap_or_default(),
                a.metadata.resource_version.clone(),
            )
        })
        .collect();
    let mut changes = std::pin::pin!(
        watcher(api.clone(), config)
            .default_backoff()
            .applied_objects()
    );
    while let Some(a) = changes
        .try_next()
        .await
        .context("watching OperatorAssignments")?
    {
        let key = a.metadata.name.clone().unwrap_or_default();
        if printed.get(&key) == Some(&a.metadata.resource_version) {
            continue;
        }
        printed.insert(key, a.metadata.resource_version.clone());
        print!("{}", render::assignment_status(&a));
    }
    Ok(())
}

/// Sets (or removes) the suspend annotation `reconciler sync` honours, on the
/// named OperatorAssignment or on every one in the namespace.
pub async fn suspend(cli: &Cli, args: &NameArgs, suspended: bool) -> anyhow::Result<()> {
    use camelk_reconciler::api::OperatorAssignment;
    use camelk_reconciler::api::SUSPEND_ANNOTATION;
    use kube::api::Patch;
    let (client, default_ns) = super::cluster(cli).await?;
    super::require_crds(&client, &super::ASSIGNMENT_CRDS, &[]).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let api: Api<OperatorAssignment> = Api::namespaced(client, &ns);
    let names = named_or_all(&api, &ns, args.name.as_deref()).await?;
    let value = if suspended {
        json!("true")
    } else {
        serde_json::Value::Null
    };
    let patch =
        Patch::Merge(json!({ "metadata": { "annotations": { SUSPEND_ANNOTATION: value } } }));
    for name in names {
        api.patch(&name, &super::plugin_patch(), &patch)
            .await
            .with_context(|| format!("updating OperatorAssignment {ns}/{name}"))?;
        println!(
            "operatorassignment {ns}/{name} {}",
            if suspended { "suspended" } else { "resumed" }
        );
    }
    Ok(())
}

/// `name`, or every OperatorAssignment in `ns` (an error when there is none).
pub(super) async fn named_or_all(
    api: &Api<camelk_reconciler::api::OperatorAssignment>,
    ns: &str,
    name: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = match name {
        Some(name) => vec![name.to_string()],
        None => api
            .list(&Default::default())
            .await
            .context("listing OperatorAssignments")?
            .items
            .into_iter()
            .filter_map(|a| a.metadata.name)
            .collect(),
    };
    if names.is_empty() {
        bail!("no OperatorAssignment in namespace {ns}");
    }
    Ok(names)
}
