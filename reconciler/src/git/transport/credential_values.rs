//! The credentials of one Git transport operation (a fetch or a push), and
//! how they are kept from every log and message.
//!
//! Where they are read from is the caller's business (the Git source reads
//! files or a Kubernetes Secret before every fetch: `crate::source::credential_config`);
//! this module only holds the values, reads a Secret's (decoded) data by the
//! key names of the Kubernetes Secret types and of Flux's Git secrets
//! ([`from_secret_data`]): `token` (or `password`, or Flux's `bearerToken`),
//! `username`, `ssh-privatekey` (type `kubernetes.io/ssh-auth`; or Flux's
//! `identity`), `ssh-passphrase` (or `password` when a key is given, as Flux
//! reads it), and `known_hosts`.
//!
//! Whatever is not given falls back to the ambient credentials: the token in
//! [`super::TOKEN_ENV`], Git's credential helper, the ssh-agent.
//!
//! Guarantees: a credential value lives in a [`Secret`] whose `Debug` and
//! `Display` print nothing of it; it is handed to libgit2 only; no error
//! names a value, and [`scrub`] removes any value a transport might echo
//! from a libgit2 message.

use std::collections::BTreeMap;

use super::known_hosts::{KnownHosts, KnownHostsError};

/// Username for HTTPS tokens when none is given (GitHub, Gitea and GitLab
/// accept any username with a token; GitHub documents this one).
pub(crate) const DEFAULT_TOKEN_USERNAME: &str = "x-access-token";

/// A credential value; never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The value, for libgit2.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The credentials of one fetch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GitCredentials {
    pub(crate) username: Option<String>,
    pub(crate) token: Option<Secret>,
    pub(crate) ssh_key: Option<Secret>,
    pub(crate) ssh_passphrase: Option<Secret>,
    pub(crate) known_hosts: Option<KnownHosts>,
}

impl GitCredentials {
    /// Replaces every credential value in `message` by `***`.
    pub(crate) fn scrub(&self, message: &str) -> String {
        scrub(message, [&self.token, &self.ssh_key, &self.ssh_passphrase])
    }
}

/// Replaces each of `values` in `message` by `***`.
pub(crate) fn scrub<'a>(
    message: &str,
    values: impl IntoIterator<Item = &'a Option<Secret>>,
) -> String {
    let mut out = message.to_string();
    for value in values.into_iter().flatten() {
        let value = value.expose().trim();
        if !value.is_empty() {
            out = out.replace(value, "***");
        }
    }
    out
}

/// `text` as a credential, `None` when blank (trimmed unless `trim` is
/// false: an SSH key keeps its final newline).
pub(crate) fn non_empty(text: &str, trim: bool) -> Option<Secret> {
    let value = if trim { text.trim() } else { text };
    (!value.trim().is_empty()).then(|| Secret::new(value))
}

/// The credentials in a Secret's (decoded) data; see the module doc for
/// the keys.
pub(crate) fn from_secret_data(
    data: &BTreeMap<String, String>,
) -> Result<GitCredentials, KnownHostsError> {
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
