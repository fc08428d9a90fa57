//! A Git repository as a source: a bare cache clone fetched from the remote
//! on every poll.
//!
//! Expected flow of [`GitSource::fetch`]:
//! 1. open the cache clone (a bare repository under the cache directory), or
//!    create it on first use;
//! 2. fetch `+refs/heads/<branch>` from the URL into
//!    `refs/remotes/origin/<branch>` (forced: the remote's head wins);
//! 3. read the manifest blob at `path` in that commit.
//!
//! Guarantees: nothing is written outside the cache directory; a failed fetch
//! leaves the previous fetch usable; credentials are handed to libgit2 only
//! and never logged. URLs: a local path, `file://`, and whatever transports
//! libgit2 was built with (`https://`, `ssh://`); a token for HTTPS comes
//! from [`crate::git::TOKEN_ENV`], SSH keys from the ssh-agent.

use std::path::{Path, PathBuf};

use git2::{Cred, CredentialType, FetchOptions, Oid, RemoteCallbacks, Repository};

use super::Revision;

/// Why a revision could not be fetched or read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("creating the cache directory {path}: {source}")]
    CacheDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the cache clone {path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("fetching branch `{branch}` from {url}: {source}")]
    Fetch {
        url: String,
        branch: String,
        #[source]
        source: git2::Error,
    },
    #[error("branch `{branch}` not found at {url}")]
    NoBranch { url: String, branch: String },
    #[error("commit {sha}: {source}")]
    Commit {
        sha: String,
        #[source]
        source: git2::Error,
    },
    #[error("{path} does not exist at commit {sha}")]
    MissingFile { path: String, sha: String },
}

/// A branch of a Git repository and the manifest's path in it.
pub struct GitSource {
    url: String,
    branch: String,
    path: String,
    cache: PathBuf,
    last_head: Option<Oid>,
}

impl GitSource {
    /// `url` (a path, `file://`, `https://` or `ssh://`), `branch`, the
    /// manifest's `path` inside the repository, and a cache directory the
    /// source may own.
    pub fn new(url: &str, branch: &str, path: &str, cache: &Path) -> GitSource {
        GitSource {
            url: url.to_string(),
            branch: branch.to_string(),
            path: path.trim_start_matches('/').to_string(),
            cache: cache.to_path_buf(),
            last_head: None,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    fn open(&self) -> Result<Repository, SourceError> {
        let cache_err = |source| SourceError::Cache {
            path: self.cache.clone(),
            source,
        };
        match Repository::open_bare(&self.cache) {
            Ok(repo) => Ok(repo),
            Err(_) => {
                std::fs::create_dir_all(&self.cache).map_err(|source| SourceError::CacheDir {
                    path: self.cache.clone(),
                    source,
                })?;
                Repository::init_bare(&self.cache).map_err(cache_err)
            }
        }
    }

    /// Fetches the branch and reads the manifest at its head.
    pub fn fetch(&mut self) -> Result<Revision, SourceError> {
        let repo = self.open()?;
        let tracking = format!("refs/remotes/origin/{}", self.branch);
        let refspec = format!("+refs/heads/{}:{tracking}", self.branch);
        let fetch_err = |source| SourceError::Fetch {
            url: self.url.clone(),
            branch: self.branch.clone(),
            source,
        };
        {
            let mut remote = repo.remote_anonymous(&self.url).map_err(fetch_err)?;
            let mut options = FetchOptions::new();
            options.remote_callbacks(credentials());
            remote
                .fetch(&[refspec.as_str()], Some(&mut options), None)
                .map_err(fetch_err)?;
        }
        let head = repo
            .refname_to_id(&tracking)
            .map_err(|_| SourceError::NoBranch {
                url: self.url.clone(),
                branch: self.branch.clone(),
            })?;
        let rewound = match self.last_head {
            Some(previous) if previous != head => {
                !repo.graph_descendant_of(head, previous).unwrap_or(false)
            }
            _ => false,
        };
        self.last_head = Some(head);
        let text = read_blob(&repo, head, &self.path)?;
        Ok(Revision {
            sha: head.to_string(),
            text,
            file: self.path.clone(),
            rewound,
        })
    }

    /// The manifest text at an earlier commit `sha` the cache has fetched.
    pub fn read_at(&self, sha: &str) -> Result<String, SourceError> {
        let repo = self.open()?;
        let oid = Oid::from_str(sha).map_err(|source| SourceError::Commit {
            sha: sha.to_string(),
            source,
        })?;
        read_blob(&repo, oid, &self.path)
    }
}

fn read_blob(repo: &Repository, commit: Oid, path: &str) -> Result<String, SourceError> {
    let sha = commit.to_string();
    let commit_err = |source| SourceError::Commit {
        sha: sha.clone(),
        source,
    };
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(commit_err)?;
    let missing = || SourceError::MissingFile {
        path: path.to_string(),
        sha: sha.clone(),
    };
    let entry = tree.get_path(Path::new(path)).map_err(|_| missing())?;
    let blob = entry
        .to_object(repo)
        .and_then(|o| o.peel_to_blob())
        .map_err(|_| missing())?;
    Ok(String::from_utf8_lossy(blob.content()).into_owned())
}

fn credentials() -> RemoteCallbacks<'static> {
    let token = std::env::var(crate::git::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    let mut attempts = 0;
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(move |_url, username, allowed| {
        attempts += 1;
        if attempts > 3 {
            return Err(git2::Error::from_str(
                "the remote refused every credential offered",
            ));
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
            && let Some(token) = &token
        {
            return Cred::userpass_plaintext(username.unwrap_or("x-access-token"), token);
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            return Cred::ssh_key_from_agent(username.unwrap_or("git"));
        }
        Cred::default()
    });
    callbacks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, path: &str, text: &str, parent: Option<Oid>) -> Oid {
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let blob = repo.blob(text.as_bytes()).unwrap();
        let mut builder = repo.treebuilder(None).unwrap();
        builder.insert(path, blob, 0o100644).unwrap();
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        let parents: Vec<git2::Commit> = parent
            .into_iter()
            .map(|p| repo.find_commit(p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, "m", &tree, &refs)
            .unwrap()
    }

    #[test]
    fn fetches_follows_new_commits_and_reports_a_rewind() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init(dir.path().join("remote")).unwrap();
        let first = commit(&remote, "m.yaml", "one", None);
        let branch = remote.head().unwrap().shorthand().unwrap().to_string();
        let url = format!("file://{}", dir.path().join("remote").display());
        let mut source = GitSource::new(&url, &branch, "m.yaml", &dir.path().join("cache"));

        let r1 = source.fetch().unwrap();
        assert_eq!(
            (r1.sha.as_str(), r1.text.as_str()),
            (&*first.to_string(), "one")
        );
        assert!(!r1.rewound);
        let second = commit(&remote, "m.yaml", "two", Some(first));
        let r2 = source.fetch().unwrap();
        assert_eq!(r2.sha, second.to_string());
        assert!(!r2.rewound);
        assert_eq!(source.read_at(&r1.sha).unwrap(), "one");

        // Force-push: a new root commit replaces the branch.
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let blob = remote.blob(b"three").unwrap();
        let mut builder = remote.treebuilder(None).unwrap();
        builder.insert("m.yaml", blob, 0o100644).unwrap();
        let tree = remote.find_tree(builder.write().unwrap()).unwrap();
        let orphan = remote.commit(None, &sig, &sig, "m", &tree, &[]).unwrap();
        remote
            .reference(&format!("refs/heads/{branch}"), orphan, true, "force")
            .unwrap();
        let r3 = source.fetch().unwrap();
        assert_eq!((r3.text.as_str(), r3.rewound), ("three", true));
    }

    #[test]
    fn missing_branch_and_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init(dir.path().join("remote")).unwrap();
        commit(&remote, "m.yaml", "one", None);
        let branch = remote.head().unwrap().shorthand().unwrap().to_string();
        let url = dir.path().join("remote").display().to_string();
        let mut nobranch = GitSource::new(&url, "nope", "m.yaml", &dir.path().join("c1"));
        assert!(nobranch.fetch().is_err());
        let mut nofile = GitSource::new(&url, &branch, "other.yaml", &dir.path().join("c2"));
        assert!(matches!(
            nofile.fetch(),
            Err(SourceError::MissingFile { .. })
        ));
    }
}
