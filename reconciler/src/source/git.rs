//! A Git repository as a source: a bare cache clone fetched from the remote
//! on every poll.
//!
//! Expected flow of [`GitSource::fetch`]:
//! 1. read the credentials now ([`CredentialConfig::resolve`]: files or a
//!    Secret, so a rotation is used by the next fetch);
//! 2. open the cache clone (a bare repository under the cache directory), or
//!    create it on first use;
//! 3. fetch `+refs/heads/<branch>` from the URL into
//!    `refs/remotes/origin/<branch>` (forced: the remote's head wins); over
//!    `ssh://` with a known_hosts given, the server's host key is checked
//!    before anything is sent ([`super::known_hosts`]);
//! 4. read the manifest blob at `path` in that commit.
//!
//! Guarantees: nothing is written outside the cache directory; a failed fetch
//! leaves the previous fetch usable; credentials are handed to libgit2 only,
//! never logged, and scrubbed from its error messages (and a password in the
//! URL is left out of every message). URLs: a local path, `file://`, and
//! whatever transports libgit2 was built with (`https://`, `ssh://`).
//! Credentials offered, in order: the configured token (HTTPS) or key (SSH),
//! then the token in [`crate::git::TOKEN_ENV`], Git's credential helper, the
//! ssh-agent.

use std::path::{Path, PathBuf};

use git2::{
    CertificateCheckStatus, Cred, CredentialType, FetchOptions, Oid, RemoteCallbacks, Repository,
};

use super::credentials::{CredentialConfig, DEFAULT_TOKEN_USERNAME, GitCredentials};
use super::known_hosts::{HostKeyError, ssh_port};
use super::{Revision, SourceError};

/// A branch of a Git repository and the manifest's path in it.
pub struct GitSource {
    /// The URL as given, for libgit2 only.
    remote_url: String,
    /// The URL without a password, for messages.
    url: String,
    branch: String,
    path: String,
    cache: PathBuf,
    credentials: CredentialConfig,
    last_head: Option<Oid>,
}

impl GitSource {
    /// `url` (a path, `file://`, `https://` or `ssh://`), `branch`, the
    /// manifest's `path` inside the repository, and a cache directory the
    /// source may own. Credentials are the ambient ones until
    /// [`GitSource::with_credentials`].
    pub fn new(url: &str, branch: &str, path: &str, cache: &Path) -> GitSource {
        GitSource {
            remote_url: url.to_string(),
            url: redact_url(url),
            branch: branch.to_string(),
            path: path.trim_start_matches('/').to_string(),
            cache: cache.to_path_buf(),
            credentials: CredentialConfig::default(),
            last_head: None,
        }
    }

    /// Where the credentials are read from at each fetch.
    pub fn with_credentials(mut self, credentials: CredentialConfig) -> GitSource {
        self.credentials = credentials;
        self
    }

    /// The URL, without a password it may carry.
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

    /// Reads the credentials, fetches the branch and reads the manifest at
    /// its head. Blocks the thread for the Git work (`block_in_place`: needs
    /// the multi-threaded runtime).
    pub async fn fetch(&mut self) -> Result<Revision, SourceError> {
        let credentials = self.credentials.resolve().await?;
        tokio::task::block_in_place(|| self.fetch_with(&credentials))
    }

    fn fetch_with(&mut self, credentials: &GitCredentials) -> Result<Revision, SourceError> {
        let repo = self.open()?;
        let tracking = format!("refs/remotes/origin/{}", self.branch);
        let refspec = format!("+refs/heads/{}:{tracking}", self.branch);
        let fetch_err = |source: git2::Error| {
            let message = credentials
                .scrub(source.message())
                .replace(&self.remote_url, &self.url);
            if crate::git::is_untrusted_certificate(&source) {
                return SourceError::UntrustedCertificate {
                    url: self.url.clone(),
                    branch: self.branch.clone(),
                    message,
                };
            }
            SourceError::Fetch {
                url: self.url.clone(),
                branch: self.branch.clone(),
                source: git2::Error::new(source.code(), source.class(), message),
            }
        };
        let helper_config = repo.config().ok();
        {
            let mut remote = repo.remote_anonymous(&self.remote_url).map_err(fetch_err)?;
            let mut options = FetchOptions::new();
            options.remote_callbacks(callbacks(
                credentials,
                helper_config.as_ref(),
                ssh_port(&self.remote_url),
            ));
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
    pub async fn read_at(&self, sha: &str) -> Result<String, SourceError> {
        tokio::task::block_in_place(|| {
            let repo = self.open()?;
            let oid = Oid::from_str(sha).map_err(|source| SourceError::Commit {
                sha: sha.to_string(),
                source,
            })?;
            read_blob(&repo, oid, &self.path)
        })
    }
}

/// `url` with the password of its `user:password@` part replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let masked = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_string()
            };
            format!("{scheme}://{masked}@{host}{tail}")
        }
        None => url.to_string(),
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

/// libgit2's callbacks: credentials as the remote asks for them, and the
/// host key check when a known_hosts is given. Fetches and the plugin's
/// pushes ([`crate::git::Checkout::push`]) offer credentials the same way.
pub(crate) fn callbacks<'a>(
    credentials: &'a GitCredentials,
    config: Option<&'a git2::Config>,
    port: u16,
) -> RemoteCallbacks<'a> {
    let env_token = std::env::var(crate::git::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    let mut attempts = 0;
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(move |url, username, allowed| {
        attempts += 1;
        if attempts > 3 {
            return Err(git2::Error::from_str(
                "the remote refused every credential offered",
            ));
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
            let token = credentials
                .token
                .as_ref()
                .map(|t| t.expose())
                .or(env_token.as_deref());
            if let Some(token) = token {
                let user = credentials
                    .username
                    .as_deref()
                    .or(username)
                    .unwrap_or(DEFAULT_TOKEN_USERNAME);
                return Cred::userpass_plaintext(user, token);
            }
            if let Some(config) = config
                && let Ok(cred) = Cred::credential_helper(config, url, username)
            {
                return Ok(cred);
            }
        }
        let ssh_user = username
            .or(credentials.username.as_deref())
            .unwrap_or("git");
        if allowed.contains(CredentialType::SSH_MEMORY)
            && let Some(key) = &credentials.ssh_key
        {
            return Cred::ssh_key_from_memory(
                ssh_user,
                None,
                key.expose(),
                credentials.ssh_passphrase.as_ref().map(|p| p.expose()),
            );
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            return Cred::ssh_key_from_agent(ssh_user);
        }
        if allowed.contains(CredentialType::USERNAME) {
            return Cred::username(ssh_user);
        }
        Cred::default()
    });
    if let Some(known_hosts) = &credentials.known_hosts {
        callbacks.certificate_check(move |cert, host| {
            let Some(hostkey) = cert.as_hostkey() else {
                // TLS: libgit2 verifies the certificate chain itself.
                return Ok(CertificateCheckStatus::CertificatePassthrough);
            };
            let result = match hostkey.hostkey() {
                Some(key) => known_hosts.check(host, port, key),
                None => Err(HostKeyError::NoKey),
            };
            match result {
                Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
                Err(e) => Err(git2::Error::new(
                    git2::ErrorCode::Certificate,
                    git2::ErrorClass::Ssh,
                    e.to_string(),
                )),
            }
        });
    }
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

    #[tokio::test(flavor = "multi_thread")]
    async fn fetches_follows_new_commits_and_reports_a_rewind() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init(dir.path().join("remote")).unwrap();
        let first = commit(&remote, "m.yaml", "one", None);
        let branch = remote.head().unwrap().shorthand().unwrap().to_string();
        let url = format!("file://{}", dir.path().join("remote").display());
        let mut source = GitSource::new(&url, &branch, "m.yaml", &dir.path().join("cache"));

        let r1 = source.fetch().await.unwrap();
        assert_eq!(
            (r1.sha.as_str(), r1.text.as_str()),
            (&*first.to_string(), "one")
        );
        assert!(!r1.rewound);
        let second = commit(&remote, "m.yaml", "two", Some(first));
        let r2 = source.fetch().await.unwrap();
        assert_eq!(r2.sha, second.to_string());
        assert!(!r2.rewound);
        assert_eq!(source.read_at(&r1.sha).await.unwrap(), "one");

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
        let r3 = source.fetch().await.unwrap();
        assert_eq!((r3.text.as_str(), r3.rewound), ("three", true));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn missing_branch_and_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init(dir.path().join("remote")).unwrap();
        commit(&remote, "m.yaml", "one", None);
        let branch = remote.head().unwrap().shorthand().unwrap().to_string();
        let url = dir.path().join("remote").display().to_string();
        let mut nobranch = GitSource::new(&url, "nope", "m.yaml", &dir.path().join("c1"));
        assert!(nobranch.fetch().await.is_err());
        let mut nofile = GitSource::new(&url, &branch, "other.yaml", &dir.path().join("c2"));
        assert!(matches!(
            nofile.fetch().await,
            Err(SourceError::MissingFile { .. })
        ));
    }

    #[test]
    fn passwords_in_urls_are_left_out() {
        assert_eq!(
            redact_url("https://bot:t0ken@git.example.com/a.git"),
            "https://bot:***@git.example.com/a.git"
        );
        assert_eq!(
            redact_url("ssh://git@git.example.com:2222/a.git"),
            "ssh://git@git.example.com:2222/a.git"
        );
        assert_eq!(redact_url("/srv/git/a.git"), "/srv/git/a.git");
    }
}
