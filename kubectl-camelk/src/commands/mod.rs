//! One module per command group; each turns arguments into library calls and
//! prints the result. Shared here: finding the manifest and the cluster.

pub mod approve;
pub mod assignments;
pub mod check;
pub mod edit;
pub mod events;
pub mod history;
pub mod operator_scopes;
pub mod ownership;
pub mod plan;
pub mod record;
pub mod strip_owner_keys;
pub mod sync;
pub mod validate;
pub mod version;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use camelk_reconciler::api::OperatorAssignmentSpec;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::connect::ConnectError;
use camelk_reconciler::git::Checkout;
use camelk_reconciler::preflight::{self, Crd, PreflightError};

use crate::cli::{Cli, ManifestArgs};
use crate::render;

/// The manifest file name at a repository's root when `--file` is not given.
pub const DEFAULT_FILE: &str = "operator-assignment.yaml";

/// Where the manifest is: its path on disk, the name messages use, and the
/// checkout it belongs to (when there is one).
pub struct Location {
    pub path: PathBuf,
    pub display: String,
    pub checkout: Option<Checkout>,
    /// Path inside the checkout, `/`-separated.
    pub in_repo: Option<String>,
}

impl Location {
    /// The checkout and the manifest's path in it, for a command that reads
    /// Git history; `why` says what needs the checkout when there is none.
    pub fn in_checkout(&self, why: &str) -> anyhow::Result<(&Checkout, &str)> {
        let checkout = self.checkout.as_ref().context(why.to_string())?;
        let path = self
            .in_repo
            .as_deref()
            .context("the manifest is outside the checkout")?;
        Ok((checkout, path))
    }
}

/// Resolves `--repo` and `--file`. A checkout is required when `need_repo`.
pub fn locate(args: &ManifestArgs, need_repo: bool) -> anyhow::Result<Location> {
    let base = args.repo.clone();
    let path = match (&args.file, &base) {
        (Some(file), Some(repo)) if file.is_relative() => repo.join(file),
        (Some(file), _) => file.clone(),
        (None, _) => {
            let start = base.clone().unwrap_or_else(|| PathBuf::from("."));
            let checkout = Checkout::discover(&start)?;
            checkout.workdir().join(DEFAULT_FILE)
        }
    };
    let start = match &base {
        Some(repo) => repo.clone(),
        None => path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let checkout = match Checkout::discover(&start) {
        Ok(checkout) => Some(checkout),
        Err(e) if need_repo => return Err(e.into()),
        Err(_) => None,
    };
    let in_repo = match &checkout {
        Some(c) => Some(c.relative(&path)?),
        None => None,
    };
    let display = in_repo
        .clone()
        .unwrap_or_else(|| path.display().to_string());
    Ok(Location {
        path,
        display,
        checkout,
        in_repo,
    })
}

/// A client for the cluster of the chosen kubeconfig and context, and the
/// namespace commands default to.
pub async fn cluster(cli: &Cli) -> anyhow::Result<(kube::Client, String)> {
    let config = kube_config(cli).await?;
    connect(cli, config).await
}

/// [`cluster`], from a kubeconfig already read: runs its exec credential
/// plugin, if any, and makes the client.
pub async fn connect(
    cli: &Cli,
    mut config: kube::Config,
) -> anyhow::Result<(kube::Client, String)> {
    // kube would run an exec credential plugin with no time limit.
    let limit = match cli.request_timeout {
        Some(t) if t.is_zero() => None,
        Some(t) => Some(t),
        None => Some(camelk_reconciler::connect::EXEC_TIMEOUT),
    };
    camelk_reconciler::connect::run_exec_plugin(&mut config, limit).await?;
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).context("creating a Kubernetes client")?;
    Ok((client, namespace))
}

/// Before a command reads or writes anything: are the CRDs it needs
/// installed? A missing one in `required` is an error naming it, with how to
/// install it as a hint; the ones of `optional` that are missing are
/// returned, unsaid: a kind the user did not name is skipped silently
/// (Camel K v2 serves no KameletBinding, and saying so on every command is
/// noise). Say the ones the user named with [`note_skipped`].
pub async fn require_crds(
    client: &kube::Client,
    required: &[Crd],
    optional: &[Crd],
) -> anyhow::Result<Vec<Crd>> {
    match preflight::check_crds(client, required, optional).await {
        Ok(absent) => Ok(absent),
        Err(PreflightError::Missing(missing)) => {
            let mut hints = missing.hints();
            if missing.crds().contains(&KAMELET_BINDING) {
                hints.push(successor_hint(KAMELET_BINDING));
            }
            let hint = hints.join("\nhint: ");
            Err(anyhow::Error::new(missing).context(render::Hint(hint)))
        }
        Err(e) => Err(e.into()),
    }
}

const KAMELET_BINDING: Crd = Crd::Camel(CamelKind::KameletBinding);

/// KameletBinding is Camel K v1's kind: v2 releases serve Pipe instead, so
/// installing "the CRDs of your release" does not bring it back.
fn successor_hint(crd: Crd) -> String {
    format!(
        "{} (camel.apache.org/v1alpha1) is the Camel K v1 kind that Pipe replaced in v2: \
         name pipes instead",
        crd.kind()
    )
}

/// Says on stderr, one note each, that these CRDs are not installed and
/// what they hold is skipped, with the fix: for kinds the user named (on
/// the command line or in the manifest), wherever a command skips one
/// (`get` and `plan`, at the check and when a CRD goes away between the
/// check and the list).
pub fn note_skipped(crds: impl IntoIterator<Item = Crd>) {
    for crd in crds {
        eprintln!("{}", crd.skipped_note());
        eprintln!("hint: {}", crd.install_hint());
        if crd == KAMELET_BINDING {
            eprintln!("hint: {}", successor_hint(crd));
        }
    }
}

/// The kinds a manifest names itself: in its scope, its rules' matches and
/// its pins. A missing CRD of one of these is said; of any other, skipped
/// silently.
pub fn kinds_named_by(spec: &OperatorAssignmentSpec) -> BTreeSet<CamelKind> {
    spec.scope
        .kinds
        .iter()
        .chain(spec.rules.iter().flat_map(|r| &r.matches.kinds))
        .chain(spec.pins.iter().map(|p| &p.kind))
        .copied()
        .collect()
}

/// A patch the plugin sends itself, named in `managedFields` as
/// `kubectl-camelk` (the handoff's own writes say `camelk-handoff`).
pub fn plugin_patch() -> kube::api::PatchParams {
    camelk_reconciler::update_as("kubectl-camelk")
}

/// The CRDs of the commands that work on OperatorAssignments.
pub const ASSIGNMENT_CRDS: [Crd; 2] = [Crd::OperatorAssignment, Crd::INTEGRATION];

pub async fn kube_config(cli: &Cli) -> Result<kube::Config, ConnectError> {
    // --kubeconfig wins over $KUBECONFIG (a merged list), which wins over ~/.kube/config.
    let mut config =
        camelk_reconciler::connect::config(cli.kubeconfig.as_deref(), cli.context.as_deref())
            .await?;
    if let Some(user) = &cli.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !cli.as_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(cli.as_groups.clone());
    }
    if let Some(timeout) = cli.request_timeout {
        // Zero is kubectl's "no limit".
        let limit = Some(timeout).filter(|t| !t.is_zero());
        config.connect_timeout = limit;
        config.read_timeout = limit;
        config.write_timeout = limit;
    }
    Ok(config)
}

/// The namespace for resources named on the command line: `-n`, else the
/// kubeconfig context's namespace, else `default` when there is no kubeconfig
/// at all (as kubectl does). A kubeconfig or context that was asked for but
/// cannot be read is an error: guessing would pin into the wrong namespace.
pub async fn default_namespace(cli: &Cli) -> anyhow::Result<String> {
    if let Some(ns) = &cli.namespace {
        return Ok(ns.clone());
    }
    match kube_config(cli).await {
        Ok(config) => Ok(config.default_namespace),
        Err(ConnectError::Infer(_) | ConnectError::EmptyList) if cli.context.is_none() => {
            Ok("default".into())
        }
        Err(e) => Err(anyhow::Error::new(e).context("finding the namespace (or pass -n)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_names_the_kinds_of_its_scope_rules_and_pins() {
        let spec = |yaml: &str| -> OperatorAssignmentSpec {
            let text = format!(
                "apiVersion: camelk.dev/v1alpha1\nkind: OperatorAssignment\n\
                 metadata: {{name: shop}}\nspec:\n  operators:\n  \
                 - {{id: operator-1, namespace: camel-k}}\n  \
                 defaultOperator: operator-1\n{yaml}"
            );
            camelk_reconciler::manifest::Manifest::parse("m.yaml", text)
                .unwrap()
                .assignment
                .spec
        };
        assert!(kinds_named_by(&spec("")).is_empty(), "no kind named");
        let by_scope = kinds_named_by(&spec("  scope: {kinds: [Integration, Pipe]}\n"));
        assert_eq!(
            by_scope.into_iter().collect::<Vec<_>>(),
            [CamelKind::Integration, CamelKind::Pipe]
        );
        let by_rule_and_pin = kinds_named_by(&spec(
            "  rules:\n  - {match: {kinds: [Pipe]}, operator: operator-1}\n  \
             pins:\n  - {kind: KameletBinding, namespace: shop, name: legacy, operator: operator-1}\n",
        ));
        assert_eq!(
            by_rule_and_pin.into_iter().collect::<Vec<_>>(),
            [CamelKind::Pipe, CamelKind::KameletBinding]
        );
    }
}
