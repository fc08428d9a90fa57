//! Commands on who owns what in the live cluster, no Git needed: `move` (the
//! imperative guarded handoff), `get` (who owns what) and `operators` (who is
//! alive).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::{CamelKind, GROUP, owner_id};
use camelk_reconciler::fleet::{self, OperatorVersion, Renewal, VersionSource};
use camelk_reconciler::handoff::{
    Coordinator, ForcePolicy, HandoffOptions, HandoffOutcome, MoveBatch, ReleaseMode,
};
use camelk_reconciler::handoff::{Progress, Requested};
use camelk_reconciler::lock::LockTiming;
use camelk_reconciler::plan;
use camelk_reconciler::preflight::{self, Crd};
use kube::api::{Api, DynamicObject};
use serde_json::json;

use crate::cli::{Cli, GetArgs, MoveArgs, OperatorsArgs, Output, parse_resource};
use crate::render;

pub async fn move_(cli: &Cli, args: &MoveArgs) -> anyhow::Result<ExitCode> {
    let (client, default_ns) = super::cluster(cli).await?;
    let ns = cli.namespace.clone().unwrap_or(default_ns);
    let to = OperatorId::new(args.to.clone()).context("--to")?;
    let resources = args
        .resources
        .iter()
        .map(|r| parse_resource(r))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut needed = vec![Crd::INTEGRATION];
    needed.extend(resources.iter().map(|(kind, _)| Crd::Camel(*kind)));
    super::require_crds(&client, &needed, &[]).await?;

    let mut named = Vec::new();
    for (kind, name) in &resources {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &kind.api_resource());
        let obj = api
            .get_opt(name)
            .await
            .with_context(|| format!("reading {kind} {ns}/{name}"))?
            .with_context(|| format!("{kind} {ns}/{name} not found"))?;
        named.push(plan::Named {
            kind: *kind,
            name: name.clone(),
            owner: owner_id(&obj.metadata),
        });
    }
    // One handover (one request Lease) per current owner.
    let handovers = plan::by_hand(&ns, &to, named).map_err(|e| match e {
        plan::ByHandError::Unowned { .. } => {
            anyhow::anyhow!("{e}; assign it in Git (kubectl camelk assign)")
        }
        other => other.into(),
    })?;

    let lock_ns = |id: &str| {
        let client = client.clone();
        let id = id.to_string();
        let given = args.operator_namespace.clone();
        async move {
            match given {
                Some(ns) => Ok::<_, anyhow::Error>(ns),
                None => Ok(fleet::find_lock(&client, &id)
                    .await
                    .context("looking for operator locks")?
                    .with_context(|| {
                        format!(
                            "operator {id} has no lock Lease {id}-lock anywhere: is it running?"
                        )
                    })?),
            }
        }
    };
    let mut lock_namespaces = BTreeMap::new();
    lock_namespaces.insert(to.to_string(), lock_ns(to.as_str()).await?);
    let timing = LockTiming::new(
        args.lease_duration,
        args.lease_duration * 2 / 3,
        args.lease_duration / 7,
    )
    .map_err(anyhow::Error::msg)?;
    let mut coordinator = Coordinator::new(client.clone());
    let mut failed = false;
    for plan::Handover {
        from,
        resources: items,
        ..
    } in handovers
    {
        if from != to {
            // No lock anywhere: a dead owner, taken over once a lease duration
            // passes unrenewed. A failed lookup is an error, not a dead owner.
            let lock_namespace = match &args.operator_namespace {
                Some(given) => given.clone(),
                None => match fleet::find_lock(&client, from.as_str())
                    .await
                    .with_context(|| format!("looking for the lock of {from}"))?
                {
                    Some(found) => found,
                    None => {
                        eprintln!(
                            "note: {from} has no lock Lease {from}-lock anywhere; its resources are taken over once a lease duration ({:?}) passes",
                            args.lease_duration
                        );
                        ns.clone()
                    }
                },
            };
            lock_namespaces.insert(from.to_string(), lock_namespace);
        }
        let opts = HandoffOptions {
            coordinator: "kubectl-camelk".into(),
            mode: if args.upstream {
                ReleaseMode::Upstream
            } else {
                ReleaseMode::Protocol
            },
            drain_timeout: args.drain_timeout,
            force: if args.force {
                ForcePolicy::AfterDrainTimeout
            } else {
                ForcePolicy::Never
            },
            lock_timing: timing,
            lock_namespaces: lock_namespaces.clone(),
            default_lock_namespace: ns.clone(),
            poll: Duration::from_millis(500),
        };
        let batch = MoveBatch {
            namespace: ns.clone(),
            from: from.clone(),
            to: to.clone(),
            resources: items,
        };
        eprintln!(
            "moving {} resource(s) in {ns} from {from} to {to}",
            batch.resources.len()
        );
        let mut progress = render::HandoffProgress::on_stderr();
        let mut show = |p: &Progress| progress.show(p);
        let outcome = match coordinator.request(&batch, &opts).await? {
            Requested::Nothing(outcome) => outcome,
            Requested::Pending {
                request,
                already_there,
            } if args.wait => {
                coordinator
                    .drive(&request, &batch, &opts, already_there, &mut show)
                    .await?
            }
            Requested::Pending { request, .. } if cli.output.is_structured() => {
                let value = json!({ "result": "Requested", "from": from, "to": to,
                    "namespace": ns, "request": request.name,
                    "resources": request.spec.items.iter().map(|i| format!("{}/{}", i.kind, i.name)).collect::<Vec<_>>() });
                print!("{}", render::structured(&value, cli.output));
                continue;
            }
            Requested::Pending { request, .. } => {
                println!(
                    "handoff requested: Lease {ns}/{} ({} resource(s), {from} → {to}); {from} releases each when idle \
                     (follow with kubectl camelk get -n {ns}, or use --wait)",
                    request.name,
                    request.spec.items.len()
                );
                continue;
            }
        };
        progress.finish();
        failed |= !matches!(outcome, HandoffOutcome::Completed { .. });
        print_outcome(cli.output, &from, &to, &outcome);
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_outcome(output: Output, from: &OperatorId, to: &OperatorId, outcome: &HandoffOutcome) {
    if output.is_structured() {
        let value = match outcome {
            HandoffOutcome::Completed {
                moved,
                already_there,
                taken_over,
                gone,
            } => json!({
                "result": "Completed", "from": from, "to": to, "moved": moved,
                "alreadyThere": already_there, "takenOver": taken_over, "gone": gone }),
            HandoffOutcome::Stalled { moved, waiting } => json!({
                "result": "Stalled", "from": from, "to": to, "moved": moved,
                "waiting": waiting.iter().map(|(r, why)| json!({ "resource": r, "reason": why })).collect::<Vec<_>>() }),
            HandoffOutcome::TargetDead { moved, remaining } => json!({
                "result": "TargetDead", "from": from, "to": to, "moved": moved, "remaining": remaining }),
        };
        print!("{}", render::structured(&value, output));
        return;
    }
    match outcome {
        HandoffOutcome::Completed {
            moved,
            already_there,
            taken_over,
            gone,
        } => {
            for r in moved {
                println!("{r}: moved {from} → {to}");
            }
            for r in taken_over {
                println!("{r}: taken over from {from} → {to} (owner did not release)");
            }
            for r in already_there {
                println!("{r}: already owned by {to}");
            }
            for r in gone {
                println!("{r}: deleted during the move");
            }
        }
        HandoffOutcome::Stalled { moved, waiting } => {
            for r in moved {
                println!("{r}: moved {from} → {to}");
            }
            for (r, why) in waiting {
                println!(
                    "{r}: Stalled: {why} (still owned by {from}; use --force to take it after the drain timeout)"
                );
            }
        }
        HandoffOutcome::TargetDead { moved, remaining } => {
            for r in moved {
                println!("{r}: moved {from} → {to}");
            }
            for r in remaining {
                println!("{r}: not moved: {to} stopped renewing its lock; still owned by {from}");
            }
        }
    }
}

pub async fn get(cli: &Cli, args: &GetArgs) -> anyhow::Result<()> {
    let (client, default_ns) = super::cluster(cli).await?;
    let namespace = if cli.all_namespaces {
        None
    } else {
        Some(cli.namespace.clone().unwrap_or(default_ns))
    };
    let kinds: Vec<CamelKind> = match &args.kind {
        Some(k) => {
            let kind =
                CamelKind::parse(k).with_context(|| format!("`{k}` is not a Camel K kind"))?;
            // A kind asked for by name must be there.
            super::require_crds(&client, &[Crd::INTEGRATION, Crd::Camel(kind)], &[]).await?;
            vec![kind]
        }
        None => {
            // Every kind but Integration is optional: releases differ in
            // which they ship (v2.10.1 has no KameletBinding), and one not
            // asked for is skipped silently.
            let all = preflight::camel_kinds(&CamelKind::ALL);
            let absent = super::require_crds(&client, &[Crd::INTEGRATION], &all).await?;
            CamelKind::ALL
                .into_iter()
                .filter(|k| !absent.contains(&Crd::Camel(*k)))
                .collect()
        }
    };
    let (rows, missing) = fleet::resources(
        &client,
        &kinds,
        namespace.as_deref(),
        args.operator.as_deref(),
    )
    .await
    .context("listing Camel K resources")?;
    // A CRD removed since the check above: said when the kind was asked for.
    if args.kind.is_some() {
        super::note_skipped(missing.into_iter().map(Crd::Camel));
    }
    if cli.output.is_structured() {
        let items: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({ "kind": r.kind, "namespace": r.namespace, "name": r.name,
                "operator": r.owner(), "operatorLabel": r.label, "operatorAnnotation": r.annotation,
                "keysDisagree": r.disagreeing_label().is_some(),
                "labelAppliedBy": r.key_managers.label_applier,
                "annotationAppliedBy": r.key_managers.annotation_applier,
                "keysCoOwned": r.key_managers.co_owned,
                "phase": r.phase })
            })
            .collect();
        print!(
            "{}",
            render::structured(&json!({ "items": items }), cli.output)
        );
        return Ok(());
    }
    if cli.output == Output::Name {
        for r in &rows {
            println!("{}/{}", object_kind(r.kind.kind(), GROUP), r.name);
        }
        return Ok(());
    }
    let wide = cli.output == Output::Wide;
    let header = get_header(wide);
    let table: Vec<Vec<String>> = rows.iter().map(|r| get_row(r, wide)).collect();
    print!("{}", render::table(&header, &table));
    if args.watch {
        follow_resources(
            &client,
            &kinds,
            namespace.as_deref(),
            args.operator.as_deref(),
            wide,
            &rows,
        )
        .await?;
    }
    Ok(())
}

fn get_header(wide: bool) -> Vec<&'static str> {
    let mut header = vec!["NAMESPACE", "KIND", "NAME", "OPERATOR", "PHASE"];
    if wide {
        // The two keys upstream and this project read, each as it is, and
        // the tool that applies them from its manifests, if one does.
        header.extend(["LABEL", "ANNOTATION", "KEYS-APPLIED-BY"]);
    }
    header
}

fn get_row(r: &fleet::ResourceView, wide: bool) -> Vec<String> {
    // Disagreeing keys: the annotation owns (upstream obeys it); say so.
    let owner = match (r.owner(), r.disagreeing_label()) {
        (Some(o), Some(label)) => format!("{o} (label: {label})"),
        (Some(o), None) => o,
        (None, _) => "<none>".into(),
    };
    let mut row = vec![
        r.namespace.clone(),
        r.kind.to_string(),
        r.name.clone(),
        owner,
        r.phase.clone().unwrap_or_default(),
    ];
    if wide {
        let key = |k: &Option<String>| k.clone().unwrap_or_else(|| "<none>".into());
        let applier = match (r.key_managers.applier(), r.key_managers.co_owned) {
            (Some(tool), true) => format!("{tool} (co-owned)"),
            (Some(tool), false) => tool.to_string(),
            (None, _) => "<none>".into(),
        };
        row.extend([key(&r.label), key(&r.annotation), applier]);
    }
    row
}

/// `get -w`: a row each time a listed kind's resource changes owner, owner
/// keys or phase, until interrupted (as kubectl get -w).
async fn follow_resources(
    client: &kube::Client,
    kinds: &[CamelKind],
    namespace: Option<&str>,
    operator: Option<&str>,
    wide: bool,
    shown: &[fleet::ResourceView],
) -> anyhow::Result<()> {
    use futures::{StreamExt, TryStreamExt};
    use kube::runtime::{WatchStreamExt, watcher};
    let streams = kinds.iter().map(|kind| {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.api_resource()),
            None => Api::all_with(client.clone(), &kind.api_resource()),
        };
        let kind = *kind;
        watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .map_ok(move |obj| fleet::ResourceView::of(kind, &obj))
            .boxed()
    });
    // What was printed last per resource: a relist or an unrelated change
    // (a spec edit, a status field not shown) prints nothing.
    let mut printed: BTreeMap<(CamelKind, String, String), fleet::ResourceView> = shown
        .iter()
        .map(|r| ((r.kind, r.namespace.clone(), r.name.clone()), r.clone()))
        .collect();
    let mut changes = futures::stream::select_all(streams);
    let header = get_header(wide);
    while let Some(view) = changes
        .try_next()
        .await
        .context("watching Camel K resources")?
    {
        if operator.is_some() && view.owner().as_deref() != operator {
            continue;
        }
        let key = (view.kind, view.namespace.clone(), view.name.clone());
        if printed.get(&key) == Some(&view) {
            continue;
        }
        print!("{}", render::table_row(&header, get_row(&view, wide)));
        printed.insert(key, view);
    }
    Ok(())
}

/// `kind.group` as kubectl -o name prints it: the kind in lower case.
pub(super) fn object_kind(kind: &str, group: &str) -> String {
    format!("{}.{group}", kind.to_lowercase())
}

pub async fn operators(cli: &Cli, args: &OperatorsArgs) -> anyhow::Result<()> {
    let (client, _) = super::cluster(cli).await?;
    super::require_crds(&client, &[Crd::INTEGRATION], &[]).await?;
    let ops = fleet::locks(&client, args.observe)
        .await
        .context("reading operator locks")?;
    let owned = fleet::owned_counts(&client)
        .await
        .context("counting what each operator owns")?;
    let owned = |o: &fleet::OperatorView| owned.get(&o.id).copied().unwrap_or(0);
    // From each operator's Deployment, else its IntegrationPlatform; what
    // the user may not read counts as not found, so they still get the rest.
    let located: Vec<(String, String)> = ops
        .iter()
        .map(|o| (o.id.clone(), o.namespace.clone()))
        .collect();
    let versions = fleet::operator_versions(&client, &located)
        .await
        .context("reading the operators' Deployments and IntegrationPlatforms")?;
    let version_of = |o: &fleet::OperatorView| versions.get(&(o.id.clone(), o.namespace.clone()));
    if cli.output.is_structured() {
        let items: Vec<_> = ops
            .iter()
            .map(|o| {
                let (version, source, unknown) = match version_of(o) {
                    Some(OperatorVersion::Known { version, source }) => {
                        (Some(version), Some(source), None)
                    }
                    Some(OperatorVersion::Unknown(why)) => (None, None, Some(why)),
                    None => (None, None, None),
                };
                json!({ "id": o.id, "namespace": o.namespace, "version": version,
                "versionSource": source, "versionUnknown": unknown, "holder": o.holder,
                "renewTime": o.renew_time, "alive": o.renewal == Renewal::Seen, "owned": owned(o) })
            })
            .collect();
        print!(
            "{}",
            render::structured(&json!({ "items": items }), cli.output)
        );
        return Ok(());
    }
    let wide = cli.output == Output::Wide;
    let mut header = vec![
        "OPERATOR".to_string(),
        "NAMESPACE".into(),
        "VERSION".into(),
        "HOLDER".into(),
        "LAST RENEWAL".into(),
        "ALIVE".into(),
        "OWNS".into(),
    ];
    if wide {
        header.extend(["VERSION-SOURCE".into(), "LEASE DURATION".into()]);
    }
    let mut table = vec![header];
    let mut footnotes = Vec::new();
    for o in &ops {
        let alive = match o.renewal {
            Renewal::Seen => "yes".to_string(),
            Renewal::Released => "no (released)".to_string(),
            Renewal::NotSeen => format!("no renewal in {:?}", args.observe),
        };
        let (version, source) = match version_of(o) {
            Some(OperatorVersion::Known { version, source }) => {
                (version.clone(), version_source(&o.namespace, source))
            }
            Some(OperatorVersion::Unknown(why)) => {
                footnotes.push(format!("{} in {}: {why}", o.id, o.namespace));
                let mark = format!("<unknown> [{}]", footnotes.len());
                (mark.clone(), mark)
            }
            None => ("<unknown>".into(), "<unknown>".into()),
        };
        let mut row = vec![
            o.id.clone(),
            o.namespace.clone(),
            version,
            o.holder.clone().unwrap_or_else(|| "<none>".into()),
            o.renew_time.clone().unwrap_or_default(),
            alive,
            owned(o).to_string(),
        ];
        if wide {
            row.push(source);
            row.push(
                o.lease_duration_seconds
                    .map_or_else(String::new, |s| format!("{s}s")),
            );
        }
        table.push(row);
    }
    print!("{}", render::rows_table(&table));
    if !footnotes.is_empty() {
        println!();
        for (n, note) in footnotes.iter().enumerate() {
            println!("[{}] {note}", n + 1);
        }
    }
    Ok(())
}

/// Where a version was read, for the VERSION-SOURCE column.
fn version_source(namespace: &str, source: &VersionSource) -> String {
    match source {
        VersionSource::Image { deployment, .. } => {
            format!("image of Deployment {namespace}/{deployment}")
        }
        VersionSource::IntegrationPlatform { name } => {
            format!("IntegrationPlatform {namespace}/{name}")
        }
    }
}
