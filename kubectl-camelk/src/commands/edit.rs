//! `init`, `assign`, `unassign`, `rollout` and `revert`: edit the manifest,
//! show the diff and the plan, then commit on a branch (and push) unless
//! `--dry-run`.
//!
//! Order matters: everything that can fail without side effects (validation,
//! the dirty-tree check, the edit, the branch name) runs before the first
//! write, so a refused command leaves the repository as it was.

use std::time::Duration;

use anyhow::{Context, bail};
use camelk_reconciler::api::{OperatorAssignmentSpec, OperatorId, Step, parse_selector};
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::connect::ConnectError;
use camelk_reconciler::git::branch_name;
use camelk_reconciler::inventory::{Inventory, Resource, ResourceRef};
use camelk_reconciler::manifest::{self, Manifest, Revision, edit, is_dns_label, is_dns_subdomain};
use camelk_reconciler::plan::{self, Actual};

use crate::cli::{
    AssignArgs, Cli, EditArgs, InitArgs, Output, RevertArgs, RolloutArgs, UnassignArgs,
    parse_resource,
};
use crate::render;

/// A change ready to be recorded.
struct Change {
    old: String,
    new: String,
    /// First line of the commit message.
    title: String,
    /// A paragraph after the title (`revert`: which commit it undoes).
    body: Option<String>,
    /// One line per resource or move: who moves where.
    details: Vec<String>,
    /// Manifests before and after, for the plan (absent for `init`).
    manifests: Option<(Manifest, Manifest)>,
    named: Vec<ResourceRef>,
}

pub async fn init(cli: &Cli, args: &InitArgs) -> anyhow::Result<()> {
    let location = super::locate(&args.edit.manifest, true)?;
    if location.path.exists() {
        bail!(
            "{} already exists; edit it with assign, unassign or rollout",
            location.display
        );
    }
    let mut operators = Vec::new();
    for spec in &args.operators {
        let (id, namespace) = spec
            .split_once('=')
            .with_context(|| format!("--operator `{spec}`: expected ID=NAMESPACE"))?;
        OperatorId::new(id).with_context(|| format!("--operator `{spec}`"))?;
        if !is_dns_label(namespace) {
            bail!(
                "--operator `{spec}`: `{namespace}` is not a valid namespace name (at most 63 lowercase letters, digits and `-`)"
            );
        }
        operators.push((id.to_string(), namespace.to_string()));
    }
    let default = args
        .default_operator
        .clone()
        .unwrap_or_else(|| operators[0].0.clone());
    if !operators.iter().any(|(id, _)| *id == default) {
        bail!(
            "--default `{default}` is not one of the operators given with --operator ({})",
            operators
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !is_dns_subdomain(&args.name) {
        bail!(
            "--name `{}` is not a valid name: use lowercase letters, digits, `-` and `.`",
            args.name
        );
    }
    let text = manifest::starter(&args.name, &operators, &default);
    Manifest::parse(&location.display, text.clone()).map_err(anyhow::Error::from)?;
    let change = Change {
        old: String::new(),
        new: text,
        title: format!(
            "Add the OperatorAssignment {} (default operator {default})",
            args.name
        ),
        details: vec![format!(
            "operators: {}",
            operators
                .iter()
                .map(|(id, ns)| format!("{id} in {ns}"))
                .collect::<Vec<_>>()
                .join(", ")
        )],
        body: None,
        manifests: None,
        named: Vec::new(),
    };
    record(cli, &args.edit, location, change, "init").await
}

pub async fn assign(cli: &Cli, args: &AssignArgs) -> anyhow::Result<()> {
    let location = super::locate(&args.edit.manifest, !args.edit.record.dry_run)?;
    let manifest = Manifest::read(&location.path, &location.display)?;
    let namespace = super::default_namespace(cli).await?;
    let resources = parse_resources(&args.resources, &namespace)?;
    let to = OperatorId::new(&args.to).with_context(|| format!("--to `{}`", args.to))?;
    let edited = edit::assign(&manifest, &resources, &to)?;
    let title = match resources.as_slice() {
        [one] => format!("Assign {one} to {to}"),
        many => format!("Assign {} resources to {to}", many.len()),
    };
    finish(
        cli, &args.edit, location, manifest, edited, title, resources, "assign",
    )
    .await
}

pub async fn unassign(cli: &Cli, args: &UnassignArgs) -> anyhow::Result<()> {
    let location = super::locate(&args.edit.manifest, !args.edit.record.dry_run)?;
    let manifest = Manifest::read(&location.path, &location.display)?;
    let namespace = super::default_namespace(cli).await?;
    let resources = parse_resources(&args.resources, &namespace)?;
    let edited = edit::unassign(&manifest, &resources)?;
    let title = match resources.as_slice() {
        [one] => format!("Unpin {one}"),
        many => format!("Unpin {} resources", many.len()),
    };
    finish(
        cli, &args.edit, location, manifest, edited, title, resources, "unassign",
    )
    .await
}

pub async fn rollout(cli: &Cli, args: &RolloutArgs) -> anyhow::Result<()> {
    let location = super::locate(&args.edit.manifest, !args.edit.record.dry_run)?;
    let manifest = Manifest::read(&location.path, &location.display)?;
    let from = OperatorId::new(&args.from).with_context(|| format!("--from `{}`", args.from))?;
    let to = OperatorId::new(&args.to).with_context(|| format!("--to `{}`", args.to))?;
    let steps = args
        .steps
        .iter()
        .map(|s| s.parse::<Step>().with_context(|| format!("--steps `{s}`")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let selector = match &args.selector {
        Some(text) => Some((text.as_str(), parse_selector(text)?)),
        None => None,
    };
    let edited = edit::rollout(
        &manifest,
        &from,
        &to,
        &steps,
        selector.as_ref().map(|(t, s)| (*t, s)),
    )?;
    let title = format!("Roll out {from} -> {to}");
    finish(
        cli,
        &args.edit,
        location,
        manifest,
        edited,
        title,
        Vec::new(),
        "rollout",
    )
    .await
}

/// Undoes the manifest change of one commit: the lines it changed go back
/// to its first parent's, every later edit stays (`revert::revert`).
pub async fn revert(cli: &Cli, args: &RevertArgs) -> anyhow::Result<()> {
    let location = super::locate(&args.edit.manifest, true)?;
    let manifest = Manifest::read(&location.path, &location.display)?;
    let (checkout, path) = location.in_checkout("not in a Git checkout")?;
    let commit = checkout.commit(&args.rev)?;
    let short = &commit.id[..12];
    let revision = Revision {
        name: short.to_string(),
        before: match &commit.first_parent {
            Some(parent) => checkout.read_if_present(parent, path)?,
            None => None,
        },
        after: checkout.read_if_present(&commit.id, path)?,
    };
    let reverted = manifest::revert(&manifest, &revision)?;
    if reverted.text == manifest.text {
        println!(
            "{}: nothing to change; the change of {short} is undone already",
            location.display
        );
        return Ok(());
    }
    let body = match (&commit.first_parent, commit.parents) {
        (Some(parent), 2..) => format!(
            "This reverts commit {}, reversing changes made to {parent}.",
            commit.id
        ),
        _ => format!("This reverts commit {}.", commit.id),
    };
    let change = Change {
        old: manifest.text.clone(),
        new: reverted.text,
        title: format!("Revert \"{}\"", commit.summary),
        body: Some(body),
        details: reverted.changes,
        manifests: Some((manifest, reverted.manifest)),
        named: reverted.resources,
    };
    record(cli, &args.edit, location, change, "revert").await
}

#[allow(clippy::too_many_arguments)]
async fn finish(
    cli: &Cli,
    args: &EditArgs,
    location: super::Location,
    manifest: Manifest,
    edited: edit::Edited,
    title: String,
    named: Vec<ResourceRef>,
    verb: &str,
) -> anyhow::Result<()> {
    if edited.changes.is_empty() {
        println!("{}: nothing to change", location.display);
        return Ok(());
    }
    let change = Change {
        old: manifest.text.clone(),
        new: edited.text,
        title,
        body: None,
        details: edited.changes,
        manifests: Some((manifest, edited.manifest)),
        named,
    };
    record(cli, args, location, change, verb).await
}

async fn record(
    cli: &Cli,
    args: &EditArgs,
    location: super::Location,
    change: Change,
    verb: &str,
) -> anyhow::Result<()> {
    let branch = args
        .record
        .branch
        .clone()
        .unwrap_or_else(|| branch_name(&change.title));
    if !args.record.dry_run
        && let Some(checkout) = &location.checkout
    {
        let files: Vec<&str> = location.in_repo.as_deref().into_iter().collect();
        super::record::check(checkout, &files, &branch, &args.record)?;
    }

    if !cli.output.is_structured() {
        render::print_styled(&render::manifest_diff(
            &location.display,
            &change.old,
            &change.new,
        ));
    }
    if let Some((before, after)) = &change.manifests {
        let (before, after) = (&before.assignment.spec, &after.assignment.spec);
        let planned = match &args.inventory {
            Some(path) => {
                let inventory =
                    camelk_reconciler::inventory::read_file(path, &path.display().to_string())?;
                plan::plan(after, Actual::Manifest(before), &inventory)
            }
            None => match plan_against_cluster(cli, before, after).await {
                Ok(planned) => planned,
                Err(unseen) => {
                    let mut planned = plan::plan(
                        after,
                        Actual::Manifest(before),
                        &named_inventory(&change.named),
                    );
                    // Only the named resources are known: notes about others would mislead.
                    planned.notes = vec![unseen_note(
                        &unseen,
                        &scope_text(
                            &super::plan::kinds_in_scope(after),
                            super::plan::namespaces_read(cli, after),
                        ),
                        change.named.len(),
                    )];
                    planned
                }
            },
        };
        match cli.output {
            Output::Table | Output::Github | Output::Gitlab | Output::Name | Output::Wide => {
                render::print_styled(&format!("\n{}\n", render::plan_table(&planned)))
            }
            Output::Markdown => println!("\n{}", render::plan_markdown(&planned)),
            Output::Json | Output::Yaml => print!("{}", render::structured(&planned, cli.output)),
        }
    }
    if args.record.dry_run {
        eprintln!("dry run: nothing written");
        return Ok(());
    }

    let (checkout, path) = location.in_checkout("not in a Git checkout")?;
    let message =
        super::record::message(&change.title, change.body.as_deref(), &change.details, verb);
    super::record::commit(
        checkout,
        &branch,
        &[(path, &change.new)],
        &message,
        &change.title,
        &args.record,
    )
}

/// How long an edit waits for the API server to accept a connection when
/// `--request-timeout` is not given: its plan is a preview of the change,
/// not worth kube's 30 s against a server that is down.
const PREVIEW_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the plan of an edit could not read the cluster.
#[derive(Debug)]
enum Unseen {
    /// There is no kubeconfig to read: why, as a phrase.
    NoKubeconfig(&'static str),
    /// The API server at `server` did not answer.
    Unreachable { server: String, error: String },
    /// The kubeconfig or the cluster answered, but the resources could not
    /// be read (a context that does not exist, RBAC, a CRD not installed).
    Unreadable(String),
}

/// The plan of the edit (`before` → `after`) against the resources of the
/// scope in the cluster of the kubeconfig, as `plan --base --head` would
/// show it; `Unseen` says why there is none. Reaching no cluster is never
/// an error here: the edit does not need one.
async fn plan_against_cluster(
    cli: &Cli,
    before: &OperatorAssignmentSpec,
    after: &OperatorAssignmentSpec,
) -> Result<plan::Plan, Unseen> {
    let mut config = match super::kube_config(cli).await {
        Ok(config) => config,
        Err(ConnectError::Infer(_)) if cli.kubeconfig.is_none() => {
            return Err(Unseen::NoKubeconfig(
                "$KUBECONFIG is unset and there is no ~/.kube/config",
            ));
        }
        Err(ConnectError::EmptyList) => {
            return Err(Unseen::NoKubeconfig(
                "none of the files in $KUBECONFIG exists",
            ));
        }
        Err(e) => return Err(Unseen::Unreadable(e.to_string())),
    };
    if cli.request_timeout.is_none() {
        config.connect_timeout = Some(PREVIEW_CONNECT_TIMEOUT);
    }
    let server = config.cluster_url.to_string();
    let planned = async {
        let (client, _) = super::connect(cli, config).await?;
        super::plan::against_cluster(cli, &client, after, Actual::Manifest(before)).await
    };
    planned.await.map_err(|e| {
        // kube's transport errors: no HTTP answer came back.
        let unanswered = e.chain().any(|cause| {
            matches!(
                cause.downcast_ref::<kube::Error>(),
                Some(kube::Error::HyperError(_) | kube::Error::Service(_))
            )
        });
        let error = format!("{e:#}");
        if unanswered {
            Unseen::Unreachable { server, error }
        } else {
            Unseen::Unreadable(error)
        }
    })
}

/// The note an edit's plan carries when the cluster was not read: why,
/// which resources it did not see, what the plan shows instead, and the
/// flag or command that fixes it.
fn unseen_note(unseen: &Unseen, not_seen: &str, named: usize) -> String {
    let (why, fix) = match unseen {
        Unseen::NoKubeconfig(why) => (
            format!("no kubeconfig ({why})"),
            "to plan against a cluster, pass --kubeconfig FILE (or set $KUBECONFIG) and \
             --context NAME; or give --inventory FILE",
        ),
        Unseen::Unreachable { server, error } => (
            format!("the API server {server} did not answer ({error})"),
            "check it with `kubectl cluster-info`, pick another cluster with --context NAME, \
             or give --inventory FILE",
        ),
        Unseen::Unreadable(error) => (
            format!("reading it failed ({error})"),
            "fix that, or give --inventory FILE",
        ),
    };
    let shown = match named {
        0 => "this plan shows no resource".to_string(),
        1 => "this plan shows only the resource named on the command line".to_string(),
        n => format!("this plan shows only the {n} resources named on the command line"),
    };
    format!("the cluster was not read: {why}; not seen: {not_seen}, so {shown}; {fix}")
}

/// What a live read of `kinds` in `namespaces` (`None`: all) would have
/// listed, for people: `every Integration and Pipe in namespace shop`.
fn scope_text(kinds: &[CamelKind], namespaces: Option<&[String]>) -> String {
    let what = if kinds.len() == CamelKind::ALL.len() {
        "every Camel K resource".to_string()
    } else {
        let names: Vec<&str> = kinds.iter().map(|k| k.kind()).collect();
        format!("every {}", and_list(&names))
    };
    let place = match namespaces {
        None => "in every namespace".to_string(),
        Some([one]) => format!("in namespace {one}"),
        Some(many) => {
            let names: Vec<&str> = many.iter().map(String::as_str).collect();
            format!("in namespaces {}", and_list(&names))
        }
    };
    format!("{what} {place}")
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Resources named on the command line, as an inventory for the plan of an
/// edit when no inventory file is given.
fn named_inventory(named: &[ResourceRef]) -> Inventory {
    Inventory {
        keys_guarded: false,
        resources: named
            .iter()
            .map(|id| Resource {
                id: id.clone(),
                labels: Default::default(),
                owner_annotation: None,
                phase: None,
                in_flight: None,
                created_by: None,
                key_managers: Default::default(),
            })
            .collect(),
    }
}

/// `KIND/NAME` arguments, in `namespace`.
fn parse_resources(args: &[String], namespace: &str) -> anyhow::Result<Vec<ResourceRef>> {
    args.iter()
        .map(|arg| {
            let (kind, name) = parse_resource(arg)?;
            Ok(ResourceRef {
                kind,
                namespace: namespace.to_string(),
                name,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_not_seen_is_said_in_words() {
        let shop = ["shop".to_string()];
        assert_eq!(
            scope_text(&[CamelKind::Integration, CamelKind::Pipe], Some(&shop)),
            "every Integration and Pipe in namespace shop"
        );
        let two = ["shop".to_string(), "billing".to_string()];
        assert_eq!(
            scope_text(&CamelKind::ALL, Some(&two)),
            "every Camel K resource in namespaces shop and billing"
        );
        assert_eq!(
            scope_text(
                &[CamelKind::Integration, CamelKind::Pipe, CamelKind::Build],
                None
            ),
            "every Integration, Pipe and Build in every namespace"
        );
    }

    #[test]
    fn a_plan_that_read_no_cluster_says_why_what_it_missed_and_the_fix() {
        let scope = "every Camel K resource in every namespace";
        let none = unseen_note(
            &Unseen::NoKubeconfig("$KUBECONFIG is unset and there is no ~/.kube/config"),
            scope,
            0,
        );
        assert!(
            none.starts_with(
                "the cluster was not read: no kubeconfig ($KUBECONFIG is unset and there is no \
                 ~/.kube/config); not seen: every Camel K resource in every namespace, so this \
                 plan shows no resource;"
            ),
            "{none}"
        );
        assert!(none.contains("--kubeconfig FILE"), "{none}");
        assert!(none.contains("--inventory FILE"), "{none}");

        let down = unseen_note(
            &Unseen::Unreachable {
                server: "https://127.0.0.1:1/".into(),
                error: "connection refused".into(),
            },
            scope,
            2,
        );
        assert!(
            down.contains(
                "the API server https://127.0.0.1:1/ did not answer (connection refused)"
            ),
            "{down}"
        );
        assert!(
            down.contains("only the 2 resources named on the command line"),
            "{down}"
        );
        assert!(down.contains("--context NAME"), "{down}");

        let forbidden = unseen_note(&Unseen::Unreadable("forbidden".into()), scope, 1);
        assert!(
            forbidden.contains("reading it failed (forbidden)")
                && forbidden.contains("only the resource named"),
            "{forbidden}"
        );
    }
}
