//! `strip-owner-keys PATH...`: removes the owner keys from the Camel K
//! manifests of an apps repository, the marker annotation
//! `camelk.dev/owner-keys: reconciler` taking the owner annotation's place
//! so that the tool applying them applies once more and drops its claim
//! ([`camelk_reconciler::manifest::owner_keys`]), shows for each resource
//! whether it keeps its owner once they are gone (read from the cluster,
//! [`owner_keys::read_live_owners`]), and commits on a new branch as `assign` does
//! ([`super::record`]).
//!
//! Order, as for the other edits: everything that can fail without side
//! effects runs first (finding and editing every file, the checks of the
//! work tree and the branch, reading the cluster); a refused command writes
//! nothing. A file that cannot be edited refuses the whole command: a
//! partial cleanup would leave a tool applying the keys unseen.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use camelk_reconciler::git::{Checkout, GitError};
use camelk_reconciler::inventory::ResourceRef;
use camelk_reconciler::manifest::owner_keys::{
    self, LiveKeys, LiveOwners, Loss, Stripped, StrippedResource, Verdict,
};
use camelk_reconciler::manifest::{Diagnostic, Location, Severity};

use crate::cli::{Cli, StripOwnerKeysArgs};
use crate::render;

/// A file to read: where it is, and its name in messages (its path in the
/// checkout, else as given).
struct Found {
    path: PathBuf,
    name: String,
}

/// What the walk over the paths found.
#[derive(Default)]
struct Scan {
    files: Vec<Found>,
    /// Symbolic links leading outside the repository, refused.
    refused: Vec<String>,
    /// What was skipped and why.
    notes: Vec<String>,
}

/// One resource that lost keys, and what the cluster says of it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Row<'a> {
    file: &'a str,
    #[serde(flatten)]
    resource: &'a StrippedResource,
    /// The namespace the cluster was asked for (the manifest's, else the default).
    live_namespace: String,
    /// The cluster's view; `null` when not read or not found.
    live: Option<&'a LiveKeys>,
    #[serde(flatten)]
    verdict: Verdict,
    /// The verdict in words, as the table prints it.
    message: String,
}

/// The whole result, for `-o json|yaml`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    resources: &'a [Row<'a>],
    keys_removed: usize,
    files_changed: usize,
    /// How many would lose their owner; `null` when the cluster was not read.
    change_owner: Option<usize>,
    /// Whether the owner-keys policy is in force; `null` when not read.
    owner_keys_policy: Option<bool>,
    notes: &'a [Diagnostic],
    branch: Option<&'a str>,
    dry_run: bool,
}

/// One file with owner keys: where it is, its text, and its edit.
struct Edit {
    found: Found,
    old: String,
    stripped: Stripped,
}

pub async fn run(cli: &Cli, args: &StripOwnerKeysArgs) -> anyhow::Result<()> {
    let record = &args.record;
    let checkout = match Checkout::discover(&start_dir(&args.paths[0])) {
        Ok(checkout) => Some(checkout),
        Err(e) if !record.dry_run => {
            return Err(anyhow::Error::new(e).context(render::Hint(
                "strip-owner-keys commits on a branch: run it in the checkout of the apps repository (--dry-run works anywhere)"
                    .into(),
            )));
        }
        Err(_) => None,
    };
    let (edits, notes, read) = edit_files(checkout.as_ref(), &args.paths)?;
    if edits.is_empty() {
        nothing_to_change(cli, args, &notes, read);
        return Ok(());
    }

    let branch = match &record.branch {
        Some(branch) => branch.clone(),
        None => default_branch(checkout.as_ref()),
    };
    if !record.dry_run {
        let checkout = checkout.as_ref().context("not in a Git checkout")?;
        let files: Vec<&str> = edits.iter().map(|e| e.found.name.as_str()).collect();
        super::record::check(checkout, &files, &branch, record)?;
    }

    let resources = || edits.iter().flat_map(|e| e.stripped.resources.iter());
    let default_namespace = if resources().any(|r| r.namespace.is_none()) {
        super::default_namespace(cli).await?
    } else {
        String::new()
    };
    let live = if args.no_cluster {
        None
    } else {
        let ids: BTreeSet<ResourceRef> = resources()
            .filter_map(|r| identify(r, &default_namespace).1)
            .collect();
        let ids: Vec<ResourceRef> = ids.into_iter().collect();
        Some(read_live(cli, &ids).await?)
    };
    let rows = rows(&edits, live.as_ref(), &default_namespace);
    let losers = rows.iter().filter(|r| r.verdict.loses_owner()).count();

    if cli.output.is_structured() {
        let report = Report {
            resources: &rows,
            keys_removed: edits.iter().map(|e| e.stripped.keys_removed()).sum(),
            files_changed: edits.len(),
            change_owner: live.as_ref().map(|_| losers),
            owner_keys_policy: live.as_ref().map(|l| l.keys_guarded),
            notes: &notes,
            branch: (!record.dry_run).then_some(branch.as_str()),
            dry_run: record.dry_run,
        };
        print!("{}", render::structured(&report, cli.output));
    } else {
        for edit in &edits {
            render::print_styled(&render::manifest_diff(
                &edit.found.name,
                &edit.old,
                &edit.stripped.text,
            ));
        }
        print!(
            "\n{}\n{}\n",
            table(&rows),
            summary(&edits, &rows, live.is_some())
        );
    }

    if losers > 0 && !args.force {
        return Err(owners_lost(&rows));
    }
    if record.dry_run {
        eprintln!("dry run: nothing written");
        return Ok(());
    }
    let checkout = checkout.as_ref().context("not in a Git checkout")?;
    let (title, message) = commit_message(&rows, live.is_some());
    let files: Vec<(&str, &str)> = edits
        .iter()
        .map(|e| (e.found.name.as_str(), e.stripped.text.as_str()))
        .collect();
    super::record::commit(checkout, &branch, &files, &message, &title, record)
}

/// Reads and edits every file under `paths`: the files with owner keys,
/// the warnings (printed on stderr), and how many files were read. A file
/// that cannot be edited (or a link refused) is printed, and refuses the
/// whole command.
fn edit_files(
    checkout: Option<&Checkout>,
    paths: &[PathBuf],
) -> anyhow::Result<(Vec<Edit>, Vec<Diagnostic>, usize)> {
    let scan = scan(checkout, paths)?;
    let mut errors: Vec<String> = scan.refused;
    let mut notes = Vec::new();
    let mut edits = Vec::new();
    let read = scan.files.len();
    for found in scan.files {
        match read_and_strip(&found) {
            Ok((old, stripped)) => {
                notes.extend(stripped.notes.iter().cloned());
                if !stripped.resources.is_empty() {
                    edits.push(Edit {
                        found,
                        old,
                        stripped,
                    });
                }
            }
            Err(d) if d.severity == Severity::Warning => notes.push(d),
            Err(d) => errors.push(d.to_string()),
        }
    }
    for note in &scan.notes {
        eprintln!("note: {note}");
    }
    for note in &notes {
        eprintln!("{note}");
    }
    if !errors.is_empty() {
        for error in &errors {
            eprintln!("{error}");
        }
        bail!(
            "{} could not be edited; nothing written",
            plural(errors.len(), "file")
        );
    }
    Ok((edits, notes, read))
}

fn nothing_to_change(cli: &Cli, args: &StripOwnerKeysArgs, notes: &[Diagnostic], read: usize) {
    if cli.output.is_structured() {
        let report = Report {
            resources: &[],
            keys_removed: 0,
            files_changed: 0,
            change_owner: (!args.no_cluster).then_some(0),
            owner_keys_policy: None,
            notes,
            branch: None,
            dry_run: args.record.dry_run,
        };
        print!("{}", render::structured(&report, cli.output));
        return;
    }
    println!(
        "no owner keys in the Camel K manifests of {} ({}); nothing to change",
        plural(read, "file"),
        args.paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The namespace a resource is looked up in (the manifest's, else
/// `default_namespace`), and its identity when the cluster can be asked.
fn identify(r: &StrippedResource, default_namespace: &str) -> (String, Option<ResourceRef>) {
    let namespace = r
        .namespace
        .clone()
        .unwrap_or_else(|| default_namespace.to_string());
    // A resource without a plain name (a template) is not looked up.
    let kind = r.camel_kind().filter(|_| !r.name.is_empty());
    let id = kind.map(|kind| ResourceRef {
        kind,
        namespace: namespace.clone(),
        name: r.name.clone(),
    });
    (namespace, id)
}

/// One row per resource, in file order, with its verdict.
fn rows<'a>(
    edits: &'a [Edit],
    live: Option<&'a LiveOwners>,
    default_namespace: &str,
) -> Vec<Row<'a>> {
    edits
        .iter()
        .flat_map(|e| e.stripped.resources.iter().map(move |r| (&e.found, r)))
        .map(|(found, resource)| {
            let (live_namespace, id) = identify(resource, default_namespace);
            let (verdict, keys) = match (live, &id) {
                (Some(live), Some(id)) => (
                    live.verdict(id),
                    live.resources.get(id).and_then(Option::as_ref),
                ),
                _ => (Verdict::NotChecked, None),
            };
            Row {
                file: &found.name,
                resource,
                live_namespace,
                live: keys,
                message: verdict.to_string(),
                verdict,
            }
        })
        .collect()
}

/// `N keys removed from M files; K resources change owner`.
fn summary(edits: &[Edit], rows: &[Row], checked: bool) -> String {
    let keys: usize = edits.iter().map(|e| e.stripped.keys_removed()).sum();
    let losers = rows.iter().filter(|r| r.verdict.loses_owner()).count();
    format!(
        "{} removed from {}; {}",
        plural(keys, "key"),
        plural(edits.len(), "file"),
        match (checked, losers) {
            (false, _) => "owners not checked (--no-cluster)".to_string(),
            (true, 1) => "1 resource changes owner".to_string(),
            (true, n) => format!("{n} resources change owner"),
        }
    )
}

/// The refusal when resources would lose their owner, with what to do.
fn owners_lost(rows: &[Row]) -> anyhow::Error {
    let losers = rows.iter().filter(|r| r.verdict.loses_owner()).count();
    let client_side = rows.iter().any(|r| {
        matches!(
            r.verdict,
            Verdict::LosesOwner {
                loss: Loss::ClientSide { .. }
            }
        )
    });
    let hint = if client_side {
        "a tool that applies client-side deletes the keys even when co-owned: make it apply server-side (Argo CD: the ServerSideApply=true sync option), or install the owner-keys policy (examples/deploy/owner-keys), then run again; --force writes anyway"
    } else {
        "the reconciler co-owns the keys a tool applies within a round: run again once `reconciler sync` ran (`kubectl camelk sync --wait`); --force writes anyway"
    };
    anyhow::anyhow!(
        "{} would lose {} owner; nothing written",
        plural(losers, "resource"),
        if losers == 1 { "its" } else { "their" }
    )
    .context(render::Hint(hint.into()))
}

/// The commit's title and message: one line per resource, its verdict last.
fn commit_message(rows: &[Row], checked: bool) -> (String, String) {
    let title = match rows {
        [one] => format!(
            "Strip the owner keys of {} {}/{}",
            one.resource.kind, one.live_namespace, one.resource.name
        ),
        many => format!("Strip the owner keys of {} Camel K resources", many.len()),
    };
    let losers = rows.iter().filter(|r| r.verdict.loses_owner()).count();
    let body = match (checked, losers) {
        (false, _) => "The owners in the cluster were not checked (--no-cluster).".to_string(),
        (true, 0) => "Every resource keeps its owner in the cluster: the reconciler co-owns \
                      the keys (field manager camelk-owner-keys), or no tool applies them."
            .to_string(),
        (true, n) => format!(
            "{} would lose {} owner in the cluster (--force).",
            plural(n, "resource"),
            if n == 1 { "its" } else { "their" }
        ),
    };
    let details: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}/{} ({}:{}): {}; {}",
                r.resource.kind,
                r.live_namespace,
                r.resource.name,
                r.file,
                r.resource.at.line,
                r.resource.removed(),
                r.message
            )
        })
        .collect();
    let message = super::record::message(&title, Some(&body), &details, "strip-owner-keys");
    (title, message)
}

/// Reads the owner keys of `ids` from the cluster of the kubeconfig; a
/// cluster that cannot be read is an error that names `--no-cluster`.
async fn read_live(cli: &Cli, ids: &[ResourceRef]) -> anyhow::Result<LiveOwners> {
    let hint = || {
        render::Hint(
            "to check who keeps its owner, the cluster must be readable (--kubeconfig, --context); \
             --no-cluster removes the keys without checking"
                .into(),
        )
    };
    let (client, _) = super::cluster(cli)
        .await
        .context("cannot read the owners in the cluster; nothing written")
        .with_context(hint)?;
    owner_keys::read_live_owners(&client, ids)
        .await
        .context("cannot read the owners in the cluster; nothing written")
        .with_context(hint)
}

/// One row per resource, the verdict last (the format `--help` documents).
fn table(rows: &[Row]) -> String {
    const HEADER: [&str; 9] = [
        "FILE",
        "KIND",
        "NAMESPACE",
        "NAME",
        "REMOVED",
        "OWNER",
        "APPLIED BY",
        "CO-OWNED",
        "VERDICT",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (owner, applied_by, co_owned) = match (r.live, &r.verdict) {
                (Some(live), _) => (
                    live.owner.clone().unwrap_or_else(|| "<none>".into()),
                    live.applied_by.clone().unwrap_or_else(|| "-".into()),
                    if live.co_owned { "yes" } else { "no" }.to_string(),
                ),
                _ => ("-".into(), "-".into(), "-".into()),
            };
            vec![
                format!("{}:{}", r.file, r.resource.at.line),
                r.resource.kind.clone(),
                r.live_namespace.clone(),
                r.resource.name.clone(),
                r.resource.removed(),
                owner,
                applied_by,
                co_owned,
                r.message.clone(),
            ]
        })
        .collect();
    render::table(&HEADER, &cells)
}

/// The directory to look for the checkout from: `path` itself when it is a
/// directory, else the one it is in.
fn start_dir(path: &Path) -> PathBuf {
    if path.is_dir() {
        return path.to_path_buf();
    }
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `camelk/strip-owner-keys-<HEAD's short SHA>`.
fn default_branch(checkout: Option<&Checkout>) -> String {
    match checkout.and_then(|c| c.commit("HEAD").ok()) {
        Some(head) => format!("camelk/strip-owner-keys-{}", &head.id[..7]),
        None => "camelk/strip-owner-keys".to_string(),
    }
}

/// Finds the files under `paths`: every `.yaml` and `.yml` below a folder
/// (`.git`, what Git ignores and a Helm chart's `templates/` left out),
/// and each file named, whatever its name. Symbolic links are never
/// followed: named, or found leading outside the repository, they are
/// refused; found inside it, skipped (their target is a file of its own).
fn scan(checkout: Option<&Checkout>, paths: &[PathBuf]) -> anyhow::Result<Scan> {
    let mut scan = Scan::default();
    let mut seen = BTreeSet::new();
    for path in paths {
        let meta = std::fs::symlink_metadata(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let name = match checkout {
            Some(c) => c
                .relative(&absolute(path, meta.is_dir()))
                .map_err(|e| anyhow::anyhow!(refusal(&path.display().to_string(), e)))?,
            None => path.display().to_string(),
        };
        if meta.is_symlink() {
            bail!(
                "{name} is a symbolic link; it is not followed (an edit would write through it): name the file it points to instead"
            );
        }
        if meta.is_dir() {
            walk(checkout, path, &name, &mut scan, &mut seen)?;
        } else if let Some(checkout) = checkout
            && checkout.ignores(&name)?
        {
            scan.notes.push(format!(
                "{name} is ignored by Git (in no commit, so no tool deploys it): skipped"
            ));
        } else if seen.insert(name.clone()) {
            scan.files.push(Found {
                path: path.clone(),
                name,
            });
        }
    }
    Ok(scan)
}

/// Why a path is refused, in this command's words for a link leading
/// outside the repository.
fn refusal(name: &str, error: GitError) -> String {
    match error {
        GitError::SymlinkOutside { target, repo, .. } => format!(
            "{name} is a symbolic link to {}, outside the repository at {}: refused, not followed; pass paths that leave it out",
            target.display(),
            repo.display()
        ),
        other => other.to_string(),
    }
}

/// A directory named on the command line, absolute and without `.` or
/// `..`, so its path in the checkout can be found; files stay as given
/// (`Checkout::relative` judges their links).
fn absolute(path: &Path, dir: bool) -> PathBuf {
    if dir {
        path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
    } else {
        path.to_path_buf()
    }
}

fn walk(
    checkout: Option<&Checkout>,
    dir: &Path,
    name: &str,
    scan: &mut Scan,
    seen: &mut BTreeSet<String>,
) -> anyhow::Result<()> {
    let join = |child: &str| {
        if name.is_empty() {
            child.to_string()
        } else {
            format!("{}/{child}", name.trim_end_matches('/'))
        }
    };
    let chart = dir.join("Chart.yaml").is_file();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let child = join(&file_name);
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot read {}", path.display()))?;
        if file_name == ".git" {
            continue;
        }
        if kind.is_symlink() {
            match checkout.map(|c| c.relative(&path)) {
                Some(Err(e @ GitError::SymlinkOutside { .. })) => {
                    scan.refused.push(format!("{child}: error: {}", refusal(&child, e)))
                }
                Some(Err(e)) => return Err(e.into()),
                _ => scan.notes.push(format!(
                    "{child} is a symbolic link: not followed (what it points to is read where it is, if under the paths given)"
                )),
            }
            continue;
        }
        let ignored = |path: &str| match checkout {
            Some(checkout) => checkout.ignores(path),
            None => Ok(false),
        };
        if kind.is_dir() {
            if ignored(&format!("{child}/"))? {
                continue;
            }
            if chart && file_name == "templates" {
                scan.notes.push(format!(
                    "{child}: the templates of a Helm chart are not plain YAML: skipped; remove the owner keys from the chart by hand"
                ));
                continue;
            }
            walk(checkout, &path, &child, scan, seen)?;
        } else if (file_name.ends_with(".yaml") || file_name.ends_with(".yml"))
            && !ignored(&child)?
            && seen.insert(child.clone())
        {
            scan.files.push(Found { path, name: child });
        }
    }
    Ok(())
}

/// The file's text and its edit; a file too large or unreadable is an error
/// diagnostic like a syntax error.
fn read_and_strip(found: &Found) -> Result<(String, Stripped), Diagnostic> {
    let fail = |message: String| Diagnostic {
        severity: Severity::Error,
        file: found.name.clone(),
        at: Location { line: 1, column: 1 },
        message,
    };
    let size = std::fs::metadata(&found.path)
        .map_err(|e| fail(format!("cannot read it: {e}")))?
        .len();
    if size > owner_keys::MAX_FILE_BYTES {
        return Err(fail(format!(
            "{size} bytes, over the limit of {} bytes this command reads; left untouched",
            owner_keys::MAX_FILE_BYTES
        )));
    }
    let bytes = std::fs::read(&found.path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let stripped = owner_keys::strip_bytes(&found.name, &bytes)?;
    // `strip_bytes` accepted the bytes as UTF-8.
    let text = String::from_utf8(bytes).unwrap_or_default();
    Ok((text, stripped))
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}
