//! Recording an edit in Git, for every command that edits files (`init`,
//! `assign`, `unassign`, `rollout`, `revert`, `strip-owner-keys`).
//!
//! Flow: [`check`] runs before anything is written, so a refused command
//! leaves the repository as it was; then, unless `--dry-run`, [`commit`]
//! writes the files, commits them on a new branch and pushes it.

use anyhow::{Context, bail};
use camelk_reconciler::git::Checkout;

use crate::cli::RecordArgs;
use crate::render;
use crate::sigpipe::with_sigpipe_ignored;

/// Refuses the edit of `files` (paths in the checkout) on `branch` when the
/// work tree has uncommitted changes (in `files`: always; elsewhere: unless
/// `--allow-dirty`), when the branch exists or is no valid name, when one of
/// `files` is a symbolic link, or when `--push` names an unknown remote.
pub fn check(
    checkout: &Checkout,
    files: &[&str],
    branch: &str,
    args: &RecordArgs,
) -> anyhow::Result<()> {
    let dirty = checkout.dirty_paths()?;
    // The commit holds each edited file whole, so its own uncommitted lines
    // would ride along unseen: --allow-dirty never covers them.
    if let Some(file) = files.iter().find(|f| dirty.iter().any(|d| d == *f)) {
        bail!(
            "{file} has uncommitted changes, which this commit would include; commit or stash them first (--allow-dirty covers only other files)"
        );
    }
    if !dirty.is_empty() && !args.allow_dirty {
        bail!(
            "the work tree has uncommitted changes ({}); commit or stash them, or pass --allow-dirty",
            dirty.join(", ")
        );
    }
    checkout.check_new_branch(branch)?;
    for file in files {
        checkout.check_editable(file)?;
    }
    if args.push {
        checkout.check_remote(&args.remote)?;
    }
    Ok(())
}

/// The commit message: the title, an optional paragraph, one `- ` line per
/// detail, and which command wrote it.
pub fn message(title: &str, body: Option<&str>, details: &[String], verb: &str) -> String {
    format!(
        "{title}\n\n{}{}\n\nWritten by `kubectl camelk {verb}`.\n",
        body.map(|body| format!("{body}\n\n")).unwrap_or_default(),
        details
            .iter()
            .map(|d| format!("- {d}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Writes `files` (path in the checkout, new text), commits them on the new
/// `branch` and, with `--push`, pushes it; says each on stderr.
pub fn commit(
    checkout: &Checkout,
    branch: &str,
    files: &[(&str, &str)],
    message: &str,
    title: &str,
    args: &RecordArgs,
) -> anyhow::Result<()> {
    let commit = checkout.commit_files_on_new_branch(branch, files, message)?;
    eprintln!(
        "committed {} on branch {branch}: {title}",
        &commit.to_string()[..12],
    );
    if args.push {
        with_sigpipe_ignored(|| checkout.push(&args.remote, branch)).with_context(|| {
            render::Hint(format!(
                "the commit stays on the local branch {branch}, checked out; push it with `git push {} {branch}` once the cause is fixed",
                args.remote
            ))
        })?;
        eprintln!("pushed {branch} to {}", args.remote);
    }
    Ok(())
}
