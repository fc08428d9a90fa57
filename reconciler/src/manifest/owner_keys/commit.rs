//! Recording the files [`super::strip`] changed: one commit on a new
//! branch, as [`Checkout::commit_on_new_branch`] records one file.
//!
//! Expected flow, and guarantees, as there: the branch must be new and
//! valid and no file a symbolic link (checked before anything is written);
//! the files are written to the work tree; the commit's tree is `HEAD`'s
//! with only those files replaced; `HEAD` moves to the new branch and the
//! index entries of those files are updated. Other changes in the work tree
//! or the index are neither committed nor touched.

use std::path::Path;

use git2::build::TreeUpdateBuilder;
use git2::{ErrorCode, FileMode, Oid, Repository};

use crate::git::{Checkout, GitError};

fn git(step: &'static str) -> impl FnOnce(git2::Error) -> GitError {
    move |source| GitError::Git { step, source }
}

/// Writes each `(path, contents)` (paths inside the repository,
/// `/`-separated) and commits only them on the new branch `branch`, which
/// `HEAD` then points to.
pub fn commit_files_on_new_branch(
    checkout: &Checkout,
    branch: &str,
    files: &[(&str, &str)],
    message: &str,
) -> Result<Oid, GitError> {
    checkout.check_new_branch(branch)?;
    for (path, _) in files {
        checkout.check_editable(path)?;
    }
    let repo = Repository::open(checkout.workdir()).map_err(git("opening the repository"))?;
    let signature = repo.signature().map_err(GitError::NoIdentity)?;
    let parent = match repo.head() {
        Ok(head) => Some(head.peel_to_commit().map_err(git("reading HEAD"))?),
        Err(e) if e.code() == ErrorCode::UnbornBranch || e.code() == ErrorCode::NotFound => None,
        Err(e) => return Err(git("reading HEAD")(e)),
    };
    let base_tree = match &parent {
        Some(commit) => commit.tree().map_err(git("reading HEAD's tree"))?,
        None => {
            let empty = repo
                .treebuilder(None)
                .and_then(|b| b.write())
                .map_err(git("creating an empty tree"))?;
            repo.find_tree(empty)
                .map_err(git("creating an empty tree"))?
        }
    };
    let mut update = TreeUpdateBuilder::new();
    for (path, contents) in files {
        let blob = repo
            .blob(contents.as_bytes())
            .map_err(git("storing the file"))?;
        update.upsert(*path, blob, FileMode::Blob);
    }
    let tree_id = update
        .create_updated(&repo, &base_tree)
        .map_err(git("building the tree"))?;
    let tree = repo.find_tree(tree_id).map_err(git("building the tree"))?;

    for (path, contents) in files {
        let file = checkout.workdir().join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|source| GitError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&file, contents).map_err(|source| GitError::Write {
            path: file.clone(),
            source,
        })?;
    }

    let parents: Vec<&git2::Commit> = parent.iter().collect();
    let commit = repo
        .commit(None, &signature, &signature, message, &tree, &parents)
        .map_err(git("committing"))?;
    let commit_obj = repo.find_commit(commit).map_err(git("committing"))?;
    repo.branch(branch, &commit_obj, false)
        .map_err(git("creating the branch"))?;
    repo.set_head(&format!("refs/heads/{branch}"))
        .map_err(git("switching to the branch"))?;
    let mut index = repo.index().map_err(git("opening the index"))?;
    for (path, _) in files {
        index
            .add_path(Path::new(path))
            .map_err(git("updating the index"))?;
    }
    index.write().map_err(git("writing the index"))?;
    Ok(commit)
}

/// Git's ignore rules of a checkout: an ignored file is in no commit, so
/// no tool deploys it from Git.
pub struct IgnoreRules(Repository);

impl IgnoreRules {
    /// The rules of `checkout` (its `.gitignore` files, `info/exclude`, the
    /// user's excludes file).
    pub fn of(checkout: &Checkout) -> Result<IgnoreRules, GitError> {
        Repository::open(checkout.workdir())
            .map(IgnoreRules)
            .map_err(git("opening the repository"))
    }

    /// Whether `path` (inside the repository, `/`-separated; a directory
    /// ending in `/`) is ignored.
    pub fn ignores(&self, path: &str) -> Result<bool, GitError> {
        self.0
            .is_path_ignored(path)
            .map_err(git("reading the ignore rules"))
    }
}
