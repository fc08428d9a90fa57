//! Credentials of a Git source, read again before every fetch so a rotated
//! token, key or Secret is used by the next fetch without a restart.
//!
//! Where they come from ([`CredentialConfig`]):
//! - files (`--token-file`, `--ssh-key-file`, `--ssh-passphrase-file`,
//!   `--known-hosts-file`), as a mounted Secret volume provides them;
//! - or a Kubernetes Secret (`--credentials-secret NAMESPACE/NAME`) read
//!   through the API at each fetch. Its keys follow the Kubernetes Secret
//!   types and Flux's Git secrets: `token` (or `password`, or Flux's
//!   `bearerToken`), `username`, `ssh-privatekey` (type
//!   `kubernetes.io/ssh-auth`; or Flux's `identity`), `ssh-passphrase` (or
//!   `password` when a key is given, as Flux reads it), and `known_hosts`.
//!
//! Whatever is not given falls back to the ambient credentials the source
//! always used: the token in [`crate::git::TOKEN_ENV`], Git's credential
//! helper, the ssh-agent.
//!
//! Guarantees: a credential value lives in a [`Secret`] whose `Debug` and
//! `Display` print nothing of it; it is handed to libgit2 only; no error
//! names a value (file paths and Secret names only), and [`scrub`] removes
//! any value a transport might echo from a libgit2 message.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::{Api, Client};

use super::SourceError;
use super::known_hosts::KnownHosts;

/// Username for HTTPS tokens when none is given (GitHub, Gitea and GitLab
/// accept any username with a token; GitHub documents this one).
pub const DEFAULT_TOKEN_USERNAME: &str = "x-access-token";

/// A credential value; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The value, for libgit2.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a Git source's credentials are read from, at every fetch.
#[derive(Clone, Debug, Default)]
pub struct CredentialConfig {
    /// Username for the token (`--username`); the Secret's `username` wins.
    pub username: Option<String>,
    pub token_file: Option<PathBuf>,
    pub ssh_key_file: Option<PathBuf>,
    pub ssh_passphrase_file: Option<PathBuf>,
    pub known_hosts_file: Option<PathBuf>,
    pub secret: Option<SecretRef>,
}

/// A Secret holding Git credentials.
#[derive(Clone)]
pub struct SecretRef {
    pub client: Client,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretRef({}/{})", self.namespace, self.name)
    }
}

/// The credentials of one fetch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GitCredentials {
    pub username: Option<String>,
    pub token: Option<Secret>,
    pub ssh_key: Option<Secret>,
    pub ssh_passphrase: Option<Secret>,
    pub known_hosts: Option<KnownHosts>,
}

impl GitCredentials {
    /// Replaces every credential value in `message` by `***`.
    pub fn scrub(&self, message: &str) -> String {
        scrub(message, [&self.token, &self.ssh_key, &self.ssh_passphrase])
    }
}

/// Replaces each of `values` in `message` by `***`.
pub fn scrub<'a>(message: &str, values: impl IntoIterator<Item = &'a Option<Secret>>) -> String {
    let mut out = message.to_string();
    for value in values.into_iter().flatten() {
        let value = value.expose().trim();
        if !value.is_empty() {
            out = out.replace(value, "***");
        }
    }
    out
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
    pub async fn resolve(&self) -> Result<GitCredentials, SourceError> {
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

fn non_empty(text: &str, trim: bool) -> Option<Secret> {
    let value = if trim { text.trim() } else { text };
    (!value.trim().is_empty()).then(|| Secret::new(value))
}

/// The credentials in a Secret's (decoded) data; see the module doc for
/// the keys.
pub fn from_secret_data(
    data: &BTreeMap<String, String>,
) -> Result<GitCredentials, super::known_hosts::KnownHostsError> {
    let get = |keys: &[&str], trim: bool| {
        keys.iter()
            .find_map(|k| data.get(*k).and_then(|v| non_empty(v, trim)))
    };
    let ssh_key = get(&["ssh-privatekey", "identity"], false);
    let ssh_passphrase = if ssh_key.is_some() {
        get(&["ssh-passphrase", "password"], true)
    } else {
        get(&["ssh-passphrase"], true)
    };
    Ok(GitCredentials {
        username: get(&["username"], true).map(|s| s.expose().to_string()),
        token: get(&["token", "password", "bearerToken"], true),
        ssh_key,
        ssh_passphrase,
        known_hosts: data
            .get("known_hosts")
            .map(|text| KnownHosts::parse(text))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secret_keys_follow_the_kubernetes_and_flux_names() {
        let c = from_secret_data(&data(&[("token", "t0k\n"), ("username", "bot")])).unwrap();
        assert_eq!(c.token, Some(Secret::new("t0k")));
        assert_eq!(c.username.as_deref(), Some("bot"));
        assert_eq!(c.ssh_passphrase, None);

        // kubernetes.io/basic-auth and Flux: `password` is the token...
        let c = from_secret_data(&data(&[("password", "pw")])).unwrap();
        assert_eq!(c.token, Some(Secret::new("pw")));
        // ...and, next to a key, its passphrase (Flux reads it so).
        let c = from_secret_data(&data(&[("identity", "KEY\n"), ("password", "pp")])).unwrap();
        assert_eq!(c.ssh_key, Some(Secret::new("KEY\n")));
        assert_eq!(c.ssh_passphrase, Some(Secret::new("pp")));
        let c = from_secret_data(&data(&[
            ("ssh-privatekey", "K"),
            ("identity", "other"),
            ("ssh-passphrase", "p1"),
            ("password", "p2"),
        ]))
        .unwrap();
        assert_eq!(
            (c.ssh_key, c.ssh_passphrase),
            (Some(Secret::new("K")), Some(Secret::new("p1")))
        );
        assert!(from_secret_data(&data(&[("known_hosts", "broken")])).is_err());
        assert_eq!(
            from_secret_data(&data(&[("token", "  ")])).unwrap().token,
            None
        );
    }

    #[test]
    fn values_never_print() {
        let c = GitCredentials {
            token: Some(Secret::new("s3cret")),
            ssh_passphrase: Some(Secret::new("phrase")),
            ..Default::default()
        };
        assert!(!format!("{c:?}").contains("s3cret"));
        assert_eq!(
            c.scrub("auth s3cret failed (phrase)"),
            "auth *** failed (***)"
        );
    }
}
