//! `kubectl camelk version`: this plugin's version, the API server's, and the
//! running reconciler's (as it stamps every status it writes), as
//! `flux version` reports a cluster's controllers.

use anyhow::Context;
use camelk_reconciler::api::OperatorAssignment;
use camelk_reconciler::preflight::{self, Crd};
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::cli::{Cli, VersionArgs};
use crate::render;

const CLIENT: &str = concat!("kubectl-camelk ", env!("CARGO_PKG_VERSION"));

pub async fn run(cli: &Cli, args: &VersionArgs) -> anyhow::Result<()> {
    if args.client {
        print_versions(cli, None, &[]);
        return Ok(());
    }
    // The client's version first, whatever the cluster answers (as kubectl).
    if !cli.output.is_structured() {
        println!("Client Version: {CLIENT}");
    }
    let (client, default_ns) = super::cluster(cli).await?;
    let server = client
        .apiserver_version()
        .await
        .context("reading the API server's version")?
        .git_version;
    let absent = preflight::check_crds(&client, &[], &[Crd::OperatorAssignment])
        .await
        .context("reading the served APIs")?;
    let assignments = if absent.is_empty() {
        let api: Api<OperatorAssignment> = if cli.all_namespaces {
            Api::all(client)
        } else {
            Api::namespaced(client, cli.namespace.as_deref().unwrap_or(&default_ns))
        };
        api.list(&ListParams::default())
            .await
            .context("listing OperatorAssignments")?
            .items
    } else {
        Vec::new()
    };
    let reconcilers: Vec<(String, String)> = assignments
        .iter()
        .map(|a| {
            let at = format!(
                "{}/{}",
                a.metadata.namespace.as_deref().unwrap_or_default(),
                a.metadata.name.as_deref().unwrap_or_default()
            );
            let version = a
                .status
                .as_ref()
                .and_then(|s| s.reconciler_version.clone())
                .unwrap_or_else(|| "unknown (no status written yet)".into());
            (at, version)
        })
        .collect();
    print_versions(cli, Some(&server), &reconcilers);
    Ok(())
}

/// Prints what is known; the table's client line is already out when the
/// cluster was asked.
fn print_versions(cli: &Cli, server: Option<&str>, reconcilers: &[(String, String)]) {
    if cli.output.is_structured() {
        let items: Vec<_> = reconcilers
            .iter()
            .map(|(at, version)| json!({ "operatorAssignment": at, "version": version }))
            .collect();
        let mut report = json!({ "clientVersion": CLIENT });
        if let Some(server) = server {
            report["serverVersion"] = json!(server);
            report["reconcilers"] = json!(items);
        }
        print!("{}", render::structured(&report, cli.output));
        return;
    }
    let Some(server) = server else {
        println!("Client Version: {CLIENT}");
        return;
    };
    println!("Server Version: {server}");
    if reconcilers.is_empty() {
        println!("Reconciler Version: no OperatorAssignment here (-n NAMESPACE, or -A)");
    }
    for (at, version) in reconcilers {
        println!("Reconciler Version: {version} ({at})");
    }
}
