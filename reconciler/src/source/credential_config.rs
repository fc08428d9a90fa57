//! Where a Git source's credentials are read from, read again before every
//! fetch so a rotated token, key or Secret is used by the next fetch without
//! a restart.
//!
//! From ([`CredentialConfig`]):
//! - files (`--token-file`, `--ssh-key-file`, `--ssh-passphrase-file`,
//!   `--known-hosts-file`), as a mounted Secret volume provides them;
//! - or a Kubernetes Secret (`--credentials-secret NAMESPACE/NAME`) read
//!   through the API at each fetch, its keys as
//!   `crate::git::transport::credential_values::from_secret_data` reads them.
//!
//! Whatever is not given falls back to the ambient credentials the source
//! always used: the token in [`crate::git::TOKEN_ENV`], Git's credential
//! helper, the ssh-agent. No error names a value (file paths and Secret
//! names only).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::{Api, Client};

use super::SourceError;
use crate::git::transport::credential_values::{
    GitCredentials, Secret, from_secret_data, non_empty,
};
use crate::git::transport::known_hosts::KnownHosts;

/// Where a Git source's credentials are read from, at every fetch.
#[derive(Clone, Debug, Default)]
pub struct CredentialConfig {
    /// Username for the token (`--username`); the Secret's `username` wins.
    pub username: Option<String>,
    /// File holding an HTTPS token (`--token-file`), read at every fetch so a
    /// rotated token is picked up.
    pub token_file: Option<PathBuf>,
    /// File holding the SSH private key (`--ssh-key-file`).
    pub ssh_key_file: Option<PathBuf>,
    /// File holding the SSH key's passphrase, if it has one.
    pub ssh_passphrase_file: Option<PathBuf>,
    /// known_hosts file used to check the SSH server's host key.
    pub known_hosts_file: Option<PathBuf>,
    /// A Secret to read the credentials from instead of files.
    pub secret: Option<SecretRef>,
}

/// A Secret holding Git credentials.
#[derive(Clone)]
pub struct SecretRef {
    /// Client to read the Secret with.
    pub client: Client,
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl std::fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretRef({}/{})", self.namespace, self.name)
    }
}

impl CredentialConfig {
    /// Whether anything beyond the ambient credentials is configured.
    pub fn is_empty(&self) -> bool {
        self.token_file.is_none()
            && self.ssh_key_file.is_none()
            && self.known_hosts_file.is_none()
            && self.secret.is_none()
            && self.username.is_none()
    }

    /// Reads the files or the Secret now.
    pub(crate) async fn resolve(&self) -> Result<GitCredentials, SourceError> {
        let mut creds = GitCredentials {
            username: self.username.clone(),
            token: read_file("token", &self.token_file)?,
            ssh_key: read_file("SSH key", &self.ssh_key_file)?,
            ssh_passphrase: read_file("SSH passphrase", &self.ssh_passphrase_file)?,
            known_hosts: None,
        };
        if let Some(path) = &self.known_hosts_file {
            let text =
                std::fs::read_to_string(path).map_err(|source| SourceError::CredentialFile {
                    what: "known_hosts",
                    path: path.clone(),
                    source,
                })?;
            creds.known_hosts =
                Some(
                    KnownHosts::parse(&text).map_err(|source| SourceError::KnownHosts {
                        from: path.display().to_string(),
                        source,
                    })?,
                );
        }
        if let Some(secret) = &self.secret {
            let api: Api<KubeSecret> = Api::namespaced(secret.client.clone(), &secret.namespace);
            let object =
                api.get(&secret.name)
                    .await
                    .map_err(|source| SourceError::CredentialSecret {
                        namespace: secret.namespace.clone(),
                        name: secret.name.clone(),
                        source: Box::new(source),
                    })?;
            let data: BTreeMap<String, String> = object
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect();
            let from_secret =
                from_secret_data(&data).map_err(|source| SourceError::KnownHosts {
                    from: format!("Secret {}/{}", secret.namespace, secret.name),
                    source,
                })?;
            creds = GitCredentials {
                username: from_secret.username.or(creds.username),
                token: from_secret.token.or(creds.token),
                ssh_key: from_secret.ssh_key.or(creds.ssh_key),
                ssh_passphrase: from_secret.ssh_passphrase.or(creds.ssh_passphrase),
                known_hosts: from_secret.known_hosts.or(creds.known_hosts),
            };
        }
        Ok(creds)
    }
}

fn read_file(what: &'static str, path: &Option<PathBuf>) -> Result<Option<Secret>, SourceError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|source| SourceError::CredentialFile {
        what,
        path: path.clone(),
        source,
    })?;
    Ok(non_empty(&text, what != "SSH key"))
}
