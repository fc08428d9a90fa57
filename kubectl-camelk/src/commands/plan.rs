//! `plan` and `diff`: the manifest (in the work tree or at `--head`) against
//! actual owners (the cluster, an inventory file, or the manifest at
//! `--base`), or the plan the reconciler serves (`--server`).

use std::time::Duration;

use anyhow::Context;
use camelk_reconciler::api::OperatorAssignmentSpec;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::git::GitError;
use camelk_reconciler::inventory;
use camelk_reconciler::manifest::Manifest;
use camelk_reconciler::plan::{self, Actual, Plan, ServedPlan};
use camelk_reconciler::preflight::{self, Crd};

use crate::cli::{Cli, Output, PlanArgs};
use crate::render;

/// Computes (or asks the reconciler for) and prints the plan; returns it
/// for the exit code of `diff`.
pub async fn run(cli: &Cli, args: &PlanArgs) -> anyhow::Result<Plan> {
    let (planned, name, file) = match &args.server {
        Some(url) => {
            let served = served(cli, args, url).await?;
            (served.plan, served.assignment, None)
        }
        None => local(cli, args).await?,
    };
    match cli.output {
        Output::Markdown => {
            let see_all = see_all(cli, args, file.as_deref());
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

/// The plan computed here: the plan, the assignment's name, and the
/// manifest file as given with `-f`.
async fn local(cli: &Cli, args: &PlanArgs) -> anyhow::Result<(Plan, String, Option<String>)> {
    let need_repo = args.base.is_some() || args.head.is_some();
    let location = super::locate(&args.manifest, need_repo)?;
    let at_revision = |rev: &str| -> anyhow::Result<Manifest> {
        let (checkout, path) = location.in_checkout("--base and --head need a Git checkout")?;
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

    let planned = match &args.inventory {
        Some(path) => {
            let mut inventory = inventory::read_file(path, &path.display().to_string())?;
            if let Some(namespace) = only_namespace(cli) {
                inventory.resources.retain(|r| r.id.namespace == *namespace);
            }
            plan::plan(spec, actual(), &inventory)
        }
        None => {
            let (client, _) = super::cluster(cli).await?;
            against_cluster(cli, &client, spec, actual()).await?
        }
    };

    let file = args
        .manifest
        .file
        .is_some()
        .then(|| location.display.clone());
    Ok((planned, assignment_name(&desired), file))
}

/// The plan of `desired` against the resources of its scope in the cluster
/// (and the phases of those that would move), narrowed by `-n` or widened
/// by `-A` as `plan` is. Integration's CRD must be installed; another kind
/// in scope whose CRD is not is skipped, said only when the manifest names
/// that kind ([`super::kinds_named_by`]).
pub(super) async fn against_cluster(
    cli: &Cli,
    client: &kube::Client,
    desired: &OperatorAssignmentSpec,
    actual: Actual<'_>,
) -> anyhow::Result<Plan> {
    let in_scope = kinds_in_scope(desired);
    let absent = super::require_crds(
        client,
        &[Crd::INTEGRATION],
        &preflight::camel_kinds(&in_scope),
    )
    .await?;
    let named = super::kinds_named_by(desired);
    let is_named = |crd: &Crd| matches!(crd, Crd::Camel(kind) if named.contains(kind));
    super::note_skipped(absent.iter().copied().filter(is_named));
    let kinds: Vec<CamelKind> = in_scope
        .into_iter()
        .filter(|k| !absent.contains(&Crd::Camel(*k)))
        .collect();
    let live = inventory::read_in(client, &kinds, namespaces_read(cli, desired)).await?;
    // A CRD removed since the check above.
    super::note_skipped(
        live.missing_kinds
            .iter()
            .copied()
            .map(Crd::Camel)
            .filter(is_named),
    );
    let mut planned = plan::plan_reading_phases(client, desired, actual, live.inventory).await?;
    // The forecast is an aid: without it the plan still stands, and says why.
    if let Err(e) = plan::read_restart_forecast(client, &mut planned).await {
        planned.notes.push(format!(
            "no restart forecast: reading the moved Integrations' Deployments failed: {e}"
        ));
    }
    Ok(planned)
}

/// The kinds of `spec`'s scope.
pub(super) fn kinds_in_scope(spec: &OperatorAssignmentSpec) -> Vec<CamelKind> {
    CamelKind::ALL
        .into_iter()
        .filter(|k| spec.scope.covers_kind(*k))
        .collect()
}

/// `-n` narrows a plan to one namespace (`-A` undoes it).
fn only_namespace(cli: &Cli) -> Option<&String> {
    cli.namespace.as_ref().filter(|_| !cli.all_namespaces)
}

/// The namespaces a live read lists one by one: `-n`'s, else the scope's;
/// `None`: every namespace (`-A`, or a scope that names none).
pub(super) fn namespaces_read<'a>(
    cli: &'a Cli,
    spec: &'a OperatorAssignmentSpec,
) -> Option<&'a [String]> {
    match only_namespace(cli) {
        Some(namespace) => Some(std::slice::from_ref(namespace)),
        None if cli.all_namespaces || spec.scope.namespaces.is_empty() => None,
        None => Some(spec.scope.namespaces.as_slice()),
    }
}

/// The plan the reconciler at `url` serves for `--base` and `--head`.
async fn served(cli: &Cli, args: &PlanArgs, url: &str) -> anyhow::Result<ServedPlan> {
    let token = match &args.token_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the plan token file {}", path.display()))?,
        None => std::env::var("CAMELK_PLAN_TOKEN").map_err(|_| {
            anyhow::anyhow!(
                "--server needs the plan endpoint's token: --token-file FILE or $CAMELK_PLAN_TOKEN"
            )
        })?,
    };
    let endpoint = format!("{}/plan", url.trim_end_matches('/'));
    let mut query = vec![("head", args.head.clone().unwrap_or_default())];
    query.extend(args.base.clone().map(|base| ("base", base)));
    if let Some(namespace) = cli.namespace.as_ref().filter(|_| !cli.all_namespaces) {
        query.push(("namespace", namespace.clone()));
    }
    let timeout = cli.request_timeout.unwrap_or(Duration::from_secs(120));
    let shown = endpoint.clone();
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + timeout;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into();
        loop {
            let mut response = agent
                .get(&endpoint)
                .query_pairs(query.iter().map(|(k, v)| (*k, v.as_str())))
                .header("Authorization", &format!("Bearer {}", token.trim()))
                .call()
                .with_context(|| format!("asking {shown} for the plan"))?;
            let status = response.status();
            if status.is_success() {
                return response
                    .body_mut()
                    .read_json::<ServedPlan>()
                    .with_context(|| format!("reading the plan {shown} answered"));
            }
            let retry_after = retry_after(status.as_u16(), response.headers());
            let body = response.body_mut().read_to_string().unwrap_or_default();
            // A standby replica, or a leader whose cache is still cold, says
            // when to ask again; the Service may route the retry to the leader.
            match retry_after {
                Some(wait) if std::time::Instant::now() + wait < deadline => {
                    std::thread::sleep(wait);
                }
                _ => anyhow::bail!("{shown} refused the plan ({status}): {}", body.trim()),
            }
        }
    })
    .await?
}

/// How long a 503 answer asks the client to wait (`Retry-After` in
/// seconds, at most 10 s); `None` for any other answer.
fn retry_after(status: u16, headers: &ureq::http::HeaderMap) -> Option<Duration> {
    if status != 503 {
        return None;
    }
    let seconds = headers
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(seconds.clamp(1, 10)))
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
/// file (`-f`), server and namespaces, as JSON.
fn see_all(cli: &Cli, args: &PlanArgs, file: Option<&str>) -> String {
    let mut command = String::from("kubectl camelk plan");
    if let Some(file) = file {
        command.push_str(&format!(" -f {file}"));
    }
    if let Some(url) = &args.server {
        command.push_str(&format!(" --server {url}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(retry_after: Option<&str>) -> ureq::http::HeaderMap {
        let mut map = ureq::http::HeaderMap::new();
        if let Some(value) = retry_after {
            map.insert("retry-after", value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_a_503_with_retry_after_is_retried_and_the_wait_is_bounded() {
        assert_eq!(
            retry_after(503, &headers(Some("1"))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            retry_after(503, &headers(Some("3600"))),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            retry_after(503, &headers(Some("0"))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(retry_after(503, &headers(None)), None);
        assert_eq!(retry_after(503, &headers(Some("soon"))), None);
        assert_eq!(retry_after(401, &headers(Some("1"))), None);
    }
}
