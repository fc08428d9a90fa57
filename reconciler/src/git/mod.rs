//! The Git checkout the manifest lives in: reading it at a revision,
//! committing an edit on a new branch, and pushing that branch.
//!
//! Expected flow of an edit ([`Checkout::commit_on_new_branch`]):
//! 1. the caller checks [`Checkout::dirty_paths`] (and refuses unless told
//!    otherwise) before it writes anything;
//! 2. the new file is written to the work tree, and a commit whose tree is
//!    `HEAD`'s tree with only that file replaced is created on a new branch;
//! 3. `HEAD` moves to the branch and the index entry of that file is
//!    updated, so the work tree, index and `HEAD` agree for it.
//!
//! Guarantees: other changes in the work tree or the index (with
//! `--allow-dirty`) are neither committed nor touched; an existing branch is
//! never overwritten. [`Checkout::push`] reports a rejection by the remote as
//! an error (a refused push is not a success).
//!
//! Credentials for pushing, as the remote asks for them: over HTTPS a token
//! in `CAMELK_GIT_TOKEN`, else Git's credential helper (`credential.helper`);
//! over SSH the keys of the ssh-agent; otherwise the transport's default.
//! They are handed to libgit2 and never logged (`transport`, which the Git
//! source's fetches use as well).

pub(crate) mod transport;

pub use transport::set_network_timeouts;

use std::path::{Path, PathBuf};

use git2::build::TreeUpdateBuilder;
use git2::{BranchType, ErrorCode, FileMode, Oid, PushOptions, Repository, StatusOptions};

pub use transport::TOKEN_ENV;
pub(crate) use transport::is_untrusted_certificate;

use transport::credential_values::GitCredentials;
use transport::ssh_port;

/// Failures of Git operations, each naming the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The path is not inside a Git work tree.
    #[error("{path} is not inside a Git work tree: {source}")]
    NotARepository {
        /// The path that was opened.
        path: PathBuf,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },
    /// The manifest file lies outside the repository's work tree.
    #[error("{file} is outside the repository at {repo}")]
    OutsideRepository {
        /// The manifest file.
        file: PathBuf,
        /// The repository's work tree.
        repo: PathBuf,
    },
    /// The manifest is a symbolic link to a file outside the repository:
    /// refused, not followed (what is read must be what is committed).
    #[error(
        "{link} is a symbolic link to {target}, outside the repository at {repo}; it is not \
         followed: move the manifest into the repository, or name the real file with --file"
    )]
    SymlinkOutside {
        /// The link, as given.
        link: PathBuf,
        /// Where it points.
        target: PathBuf,
        /// The repository's work tree.
        repo: PathBuf,
    },
    /// An edit would write through a symbolic link (and commit a file where
    /// the repository has a link).
    #[error(
        "{link} is a symbolic link to {target}; an edit would write through it and replace the \
         link in the commit: edit the file it points to instead (--file {target})"
    )]
    SymlinkEdit {
        /// The link's path inside the repository.
        link: String,
        /// Where it points, as stored in the link.
        target: PathBuf,
    },
    /// A revision (`--base`, `--head`) does not resolve to a commit.
    #[error("revision `{rev}` not found: {source}")]
    UnknownRevision {
        /// The revision as given.
        rev: String,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },
    /// The file does not exist in that revision's tree.
    #[error("{path} does not exist at revision `{rev}`")]
    MissingAtRevision {
        /// The file's path inside the repository.
        path: String,
        /// The revision as given.
        rev: String,
    },
    /// The branch to create exists already (the branch name).
    #[error("branch `{0}` already exists; choose another name with --branch")]
    BranchExists(String),
    /// The name is not a valid Git branch name (the name).
    #[error("`{0}` is not a valid branch name")]
    InvalidBranch(String),
    /// Git has no committer identity configured (libgit2's error).
    #[error("no committer identity: set user.name and user.email in your Git configuration ({0})")]
    NoIdentity(#[source] git2::Error),
    /// The remote refused the pushed branch (hook, protection rule, non-fast-forward).
    #[error("the push of `{branch}` to `{remote}` was rejected: {message}")]
    PushRejected {
        /// The remote's name or URL.
        remote: String,
        /// The pushed branch.
        branch: String,
        /// The remote's reason.
        message: String,
    },
    /// The remote's TLS certificate is not signed by a CA trusted here.
    #[error(
        "the push of `{branch}` to `{remote}` did not start: the remote's TLS certificate is not \
         trusted here ({message}); if a private CA signed it, add that CA to the trusted \
         certificates (on Linux, `SSL_CERT_FILE` may name a PEM file)"
    )]
    UntrustedCertificate {
        /// The remote's name or URL.
        remote: String,
        /// The branch being pushed.
        branch: String,
        /// libgit2's description of the certificate failure.
        message: String,
    },
    /// Another Git operation failed.
    #[error("{step}: {source}")]
    Git {
        /// What was being done, for the message.
        step: &'static str,
        /// libgit2's error.
        #[source]
        source: git2::Error,
    },
    /// Writing a file into the work tree failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file's path.
        path: PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

fn git(step: &'static str) -> impl FnOnce(git2::Error) -> GitError {
    move |source| GitError::Git { step, source }
}

/// One commit, as [`Checkout::commit`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// Its full id, in hex.
    pub id: String,
    /// The first line of its message.
    pub summary: String,
    /// Its first parent's full id; `None` for a root commit.
    pub first_parent: Option<String>,
    /// How many parents it has: more than one for a merge.
    pub parents: usize,
}

/// A Git work tree.
pub struct Checkout {
    repo: Repository,
    workdir: PathBuf,
}

impl Checkout {
    /// The repository containing `start` (a directory or file).
    pub fn discover(start: &Path) -> Result<Checkout, GitError> {
        let repo = Repository::discover(start).map_err(|source| GitError::NotARepository {
            path: start.to_path_buf(),
            source,
        })?;
        let workdir = repo
            .workdir()
            .ok_or_else(|| GitError::NotARepository {
                path: start.to_path_buf(),
                source: git2::Error::from_str("the repository is bare"),
            })?
            .to_path_buf();
        let workdir = workdir.canonicalize().unwrap_or(workdir);
        Ok(Checkout { repo, workdir })
    }

    /// Root of the work tree (canonical path).
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// `file`'s path inside the repository, with `/` separators.
    pub fn relative(&self, file: &Path) -> Result<String, GitError> {
        let absolute = if file.is_absolute() {
            file.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(file))
                .unwrap_or_else(|_| file.to_path_buf())
        };
        let parent = absolute.parent().and_then(|p| p.canonicalize().ok());
        let resolved = match (parent, absolute.file_name()) {
            (Some(parent), Some(name)) => parent.join(name),
            _ => absolute.clone(),
        };
        if let Ok(target) = std::fs::read_link(&resolved) {
            // Where it ends up, links in the target followed too (a link
            // that dangles: where it says).
            let landing = resolved.canonicalize().unwrap_or_else(|_| {
                resolved
                    .parent()
                    .map(|p| p.join(&target))
                    .unwrap_or_else(|| target.clone())
            });
            if !landing.starts_with(&self.workdir) {
                return Err(GitError::SymlinkOutside {
                    link: file.to_path_buf(),
                    target: landing,
                    repo: self.workdir.clone(),
                });
            }
        }
        resolved
            .strip_prefix(&self.workdir)
            .map(|p| {
                p.components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .map_err(|_| GitError::OutsideRepository {
                file: file.to_path_buf(),
                repo: self.workdir.clone(),
            })
    }

    /// Paths with uncommitted changes (modified, staged or untracked; not
    /// ignored), sorted.
    pub fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        let mut options = StatusOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false);
        let statuses = self
            .repo
            .statuses(Some(&mut options))
            .map_err(git("reading the work tree status"))?;
        let mut paths: Vec<String> = statuses
            .iter()
            .filter_map(|s| s.path().ok().map(str::to_string))
            .collect();
        paths.sort();
        Ok(paths)
    }

    /// The text of `path` (inside the repository) at revision `rev`.
    pub fn read_at(&self, rev: &str, path: &str) -> Result<String, GitError> {
        let object =
            self.repo
                .revparse_single(rev)
                .map_err(|source| GitError::UnknownRevision {
                    rev: rev.to_string(),
                    source,
                })?;
        let tree = object
            .peel_to_tree()
            .map_err(|source| GitError::UnknownRevision {
                rev: rev.to_string(),
                source,
            })?;
        let missing = || GitError::MissingAtRevision {
            path: path.to_string(),
            rev: rev.to_string(),
        };
        let entry = tree.get_path(Path::new(path)).map_err(|_| missing())?;
        let blob = entry
            .to_object(&self.repo)
            .and_then(|o| o.peel_to_blob())
            .map_err(|_| missing())?;
        Ok(String::from_utf8_lossy(blob.content()).into_owned())
    }

    /// The commit `rev` names (a merge commit too), as `revert` needs it.
    pub fn commit(&self, rev: &str) -> Result<CommitInfo, GitError> {
        let unknown = |source| GitError::UnknownRevision {
            rev: rev.to_string(),
            source,
        };
        let commit = self
            .repo
            .revparse_single(rev)
            .and_then(|o| o.peel_to_commit())
            .map_err(unknown)?;
        Ok(CommitInfo {
            id: commit.id().to_string(),
            summary: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                .into_owned(),
            first_parent: commit.parent_ids().next().map(|id| id.to_string()),
            parents: commit.parent_count(),
        })
    }

    /// [`Checkout::read_at`], with `None` when `path` does not exist at `rev`.
    pub fn read_if_present(&self, rev: &str, path: &str) -> Result<Option<String>, GitError> {
        match self.read_at(rev, path) {
            Ok(text) => Ok(Some(text)),
            Err(GitError::MissingAtRevision { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `name` is a valid, unused branch name.
    pub fn check_new_branch(&self, name: &str) -> Result<(), GitError> {
        if !git2::Branch::name_is_valid(name).unwrap_or(false) {
            return Err(GitError::InvalidBranch(name.to_string()));
        }
        match self.repo.find_branch(name, BranchType::Local) {
            Ok(_) => Err(GitError::BranchExists(name.to_string())),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(()),
            Err(e) => Err(git("looking up the branch")(e)),
        }
    }

    /// Refuses to edit `path` (inside the repository) when it is a symbolic
    /// link: the write would land in its target, and the commit would turn
    /// the link into a file.
    pub fn check_editable(&self, path: &str) -> Result<(), GitError> {
        match std::fs::read_link(self.workdir.join(path)) {
            Ok(target) => Err(GitError::SymlinkEdit {
                link: path.to_string(),
                target,
            }),
            Err(_) => Ok(()),
        }
    }

    /// Writes `contents` to `path` (inside the repository) and commits only
    /// that file on a new branch `branch`, which `HEAD` then points to.
    pub fn commit_on_new_branch(
        &self,
        branch: &str,
        path: &str,
        contents: &str,
        message: &str,
    ) -> Result<Oid, GitError> {
        self.commit_files_on_new_branch(branch, &[(path, contents)], message)
    }

    /// Writes each `(path, contents)` (inside the repository, `/`-separated)
    /// and commits only those files on a new branch `branch`, which `HEAD`
    /// then points to: the commit's tree is `HEAD`'s with only them
    /// replaced, and only their index entries are updated. The branch must be
    /// new and valid and no file a symbolic link, checked before anything is
    /// written.
    pub fn commit_files_on_new_branch(
        &self,
        branch: &str,
        files: &[(&str, &str)],
        message: &str,
    ) -> Result<Oid, GitError> {
        self.check_new_branch(branch)?;
        for (path, _) in files {
            self.check_editable(path)?;
        }
        let signature = self.repo.signature().map_err(GitError::NoIdentity)?;
        let parent = match self.repo.head() {
            Ok(head) => Some(head.peel_to_commit().map_err(git("reading HEAD"))?),
            Err(e) if e.code() == ErrorCode::UnbornBranch || e.code() == ErrorCode::NotFound => {
                None
            }
            Err(e) => return Err(git("reading HEAD")(e)),
        };

        for (path, contents) in files {
            let file = self.workdir.join(path);
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

        let base_tree = match &parent {
            Some(commit) => commit.tree().map_err(git("reading HEAD's tree"))?,
            None => {
                let empty = self
                    .repo
                    .treebuilder(None)
                    .and_then(|b| b.write())
                    .map_err(git("creating an empty tree"))?;
                self.repo
                    .find_tree(empty)
                    .map_err(git("creating an empty tree"))?
            }
        };
        let mut update = TreeUpdateBuilder::new();
        for (path, contents) in files {
            let blob = self
                .repo
                .blob(contents.as_bytes())
                .map_err(git("storing the file"))?;
            update.upsert(*path, blob, FileMode::Blob);
        }
        let tree_id = update
            .create_updated(&self.repo, &base_tree)
            .map_err(git("building the tree"))?;
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(git("building the tree"))?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let commit = self
            .repo
            .commit(None, &signature, &signature, message, &tree, &parents)
            .map_err(git("committing"))?;
        let commit_obj = self.repo.find_commit(commit).map_err(git("committing"))?;
        self.repo
            .branch(branch, &commit_obj, false)
            .map_err(git("creating the branch"))?;
        self.repo
            .set_head(&format!("refs/heads/{branch}"))
            .map_err(git("switching to the branch"))?;

        let mut index = self.repo.index().map_err(git("opening the index"))?;
        for (path, _) in files {
            index
                .add_path(Path::new(path))
                .map_err(git("updating the index"))?;
        }
        index.write().map_err(git("writing the index"))?;
        Ok(commit)
    }

    /// Whether Git ignores `path` (inside the repository, `/`-separated; a
    /// directory ending in `/`): its `.gitignore` files, `info/exclude`, the
    /// user's excludes file. An ignored file is in no commit, so no tool
    /// deploys it from Git.
    pub fn ignores(&self, path: &str) -> Result<bool, GitError> {
        self.repo
            .is_path_ignored(path)
            .map_err(git("reading the ignore rules"))
    }

    /// Whether a remote named `name` is configured (checked before an edit
    /// writes anything, so `--push` to a typo fails early).
    pub fn check_remote(&self, name: &str) -> Result<(), GitError> {
        self.repo
            .find_remote(name)
            .map(|_| ())
            .map_err(git("finding the remote"))
    }

    /// Pushes `branch` to `remote` with the user's credentials.
    pub fn push(&self, remote: &str, branch: &str) -> Result<(), GitError> {
        let mut remote_handle = self
            .repo
            .find_remote(remote)
            .map_err(git("finding the remote"))?;
        let config = self
            .repo
            .config()
            .map_err(git("reading the Git configuration"))?;
        let mut rejected: Option<String> = None;
        {
            // The ambient credentials, offered as a fetch offers them.
            let ambient = GitCredentials::default();
            let url = remote_handle.url().unwrap_or_default().to_string();
            let mut callbacks = transport::callbacks(&ambient, Some(&config), ssh_port(&url));
            callbacks.push_update_reference(|_, status| {
                if let Some(message) = status {
                    rejected = Some(message.to_string());
                }
                Ok(())
            });
            let mut options = PushOptions::new();
            options.remote_callbacks(callbacks);
            let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
            remote_handle
                .push(&[refspec.as_str()], Some(&mut options))
                .map_err(|e| push_error(remote, branch, e))?;
        }
        match rejected {
            Some(message) => Err(GitError::PushRejected {
                remote: remote.to_string(),
                branch: branch.to_string(),
                message,
            }),
            None => Ok(()),
        }
    }
}

/// Why a push did not happen: a TLS certificate this machine does not trust
/// (said so, with the fix), or the remote's refusal.
fn push_error(remote: &str, branch: &str, e: git2::Error) -> GitError {
    let (remote, branch, message) = (
        remote.to_string(),
        branch.to_string(),
        e.message().to_string(),
    );
    if is_untrusted_certificate(&e) {
        GitError::UntrustedCertificate {
            remote,
            branch,
            message,
        }
    } else {
        GitError::PushRejected {
            remote,
            branch,
            message,
        }
    }
}

/// A branch name for an edit, from its description: lowercase, `-`
/// between words, under `camelk/`.
pub fn branch_name(description: &str) -> String {
    let mut name = String::from("camelk/");
    let mut dash = false;
    for c in description.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
            dash = false;
        } else if !dash && !name.ends_with('/') {
            name.push('-');
            dash = true;
        }
        if name.len() >= 80 {
            break;
        }
    }
    name.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_valid_refs() {
        assert_eq!(
            branch_name("assign Integration/orders to operator-2"),
            "camelk/assign-integration-orders-to-operator-2"
        );
        assert!(
            git2::Branch::name_is_valid(&branch_name(
                "rollout operator-1 -> operator-2 (10%, 50%)"
            ))
            .unwrap()
        );
    }
}
