//! `plan` and `diff`: the manifest (in the work tree or at `--head`) against
//! actual owners (the cluster, an inventory file, or the manifest at
//! `--base`).

use anyhow::Context;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::git::GitError;
use camelk_reconciler::inventory::{self, Inventory};
use camelk_reconciler::manifest::Manifest;
use camelk_reconciler::plan::{self, Actual, Plan};
use camelk_reconciler::preflight::{self, Crd};

use crate::cli::{Cli, Output, PlanArgs};
use crate::render;

/// Computes and prints the plan; returns it for the exit code of `diff`.
pub async fn run(cli: &Cli, args: &PlanArgs) -> anyhow::Result<Plan> {
    let need_repo = args.base.is_some() || args.head.is_some();
    let location = super::locate(&args.manifest, need_repo)?;
    let at_revision = |rev: &str| -> anyhow::Result<Manifest> {
        let checkout = location
            .checkout
            .as_ref()
            .context("--base and --head need a Git checkout")?;
        let path = location
            .in_repo
            .as_deref()
            .context("the manifest is outside the checkout")?;
        let text = checkout.read_at(rev, path)?;
        Ok(Manifest::parse(&format!("{path}@{rev}"), text)?)
    };
    let desired = match &args.head {
        Some(rev) => at_revision(rev)?,
        None => Manifest::read(&location.path, &location.display)?,
    };
    // A pull request that adds the manifest has none at its base: it moves
    // resources from the owners they carry now.
    let base = match args.base.as_deref().map(at_revision).transpose() {
        Err(e) => match e.downcast_ref() {
            Some(missing @ GitError::MissingAtRevision { .. }) => {
                eprintln!("note: {missing}; planning against the owners the resources carry now");
                None
            }
            _ => return Err(e),
        },
        Ok(base) => base,
    };
    for warning in desired
        .warnings
        .iter()
        .chain(base.iter().flat_map(|b| &b.warnings))
    {
        eprintln!("{warning}");
    }
    let spec = &desired.assignment.spec;
    let actual = || match &base {
        Some(base) => Actual::Manifest(&base.assignment.spec),
        None => Actual::OwnerKeys,
    };

    // -n narrows the plan to one namespace; without it a live read lists
    // the scope's namespaces one by one (all of them when the scope names none).
    let only = cli.namespace.as_ref().filter(|_| !cli.all_namespaces);
    let planned = match &args.inventory {
        Some(path) => {
            let mut inventory = inventory::file::read(path, &path.display().to_string())?;
            if let Some(namespace) = only {
                inventory.resources.retain(|r| r.id.namespace == *namespace);
            }
            plan::plan(spec, actual(), &inventory)
        }
        None => {
            let (client, _) = super::cluster(cli).await?;
            let in_scope: Vec<CamelKind> = CamelKind::ALL
                .into_iter()
                .filter(|k| spec.scope.covers_kind(*k))
                .collect();
            // Integration must be there; the other kinds in scope are
            // skipped, with a note, when their CRD is not installed.
            let absent = super::require_crds(
                &client,
                &[Crd::INTEGRATION],
                &preflight::camel_kinds(&in_scope),
            )
            .await?;
            let kinds: Vec<CamelKind> = in_scope
                .into_iter()
                .filter(|k| !absent.contains(&Crd::Camel(*k)))
                .collect();
            let namespaces = match only {
                Some(namespace) => Some(std::slice::from_ref(namespace)),
                None if cli.all_namespaces || spec.scope.namespaces.is_empty() => None,
                None => Some(spec.scope.namespaces.as_slice()),
            };
            let live = inventory::cluster::read_in(&client, &kinds, namespaces).await?;
            // A CRD removed since the check above.
            super::note_skipped(live.missing_kinds.iter().copied().map(Crd::Camel));
            let mut inventory: Inventory = live.inventory;
            let first = plan::plan(spec, actual(), &inventory);
            // Phases are not in metadata: read them for the would-be moves only.
            let candidates: Vec<_> = first.moves().map(|m| m.resource.clone()).collect();
            if candidates.is_empty() {
                first
            } else {
                inventory::cluster::fill_phases(&client, &mut inventory, &candidates).await?;
                plan::plan(spec, actual(), &inventory)
            }
        }
    };

    match cli.output {
        Output::Markdown => {
            let name = assignment_name(&desired);
            let see_all = see_all(cli, args, &location);
            let comment = render::Comment {
                marker: Some(&name),
                max_bytes: Some(args.max_bytes).filter(|max| *max > 0),
                see_all: Some(&see_all),
            };
            match render::plan_comment(&planned, &comment) {
                Ok(markdown) => print!("{markdown}"),
                Err(render::TooSmall(least)) => anyhow::bail!(
                    "--max-bytes {} is too small for this plan: its heading and the note on \
                     what is left out take {least} bytes",
                    args.max_bytes
                ),
            }
        }
        Output::Json | Output::Yaml => print!("{}", render::structured(&planned, cli.output)),
        Output::Table | Output::Github | Output::Gitlab | Output::Name | Output::Wide => {
            render::print_styled(&render::plan_table(&planned))
        }
    }
    Ok(planned)
}

/// The assignment a pull-request comment is about: `NAMESPACE/NAME`, or
/// `NAME` when the manifest names no namespace.
fn assignment_name(manifest: &Manifest) -> String {
    let meta = &manifest.assignment.metadata;
    let name = meta.name.clone().unwrap_or_default();
    match &meta.namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name,
    }
}

/// The command that prints every row of this plan: the same revisions,
/// file and namespaces, as JSON.
fn see_all(cli: &Cli, args: &PlanArgs, location: &super::Location) -> String {
    let mut command = String::from("kubectl camelk plan");
    if args.manifest.file.is_some() {
        command.push_str(&format!(" -f {}", location.display));
    }
    if let Some(rev) = &args.base {
        command.push_str(&format!(" --base {rev}"));
    }
    if let Some(rev) = &args.head {
        command.push_str(&format!(" --head {rev}"));
    }
    if cli.all_namespaces {
        command.push_str(" -A");
    } else if let Some(namespace) = &cli.namespace {
        command.push_str(&format!(" -n {namespace}"));
    }
    command + " -o json"
}
