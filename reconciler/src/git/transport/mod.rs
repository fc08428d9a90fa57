//! Git transport: how this library talks to a remote, for the Git source's
//! fetches and the plugin's pushes alike.
//!
//! Expected flow of one fetch or push:
//! 1. the caller holds the [`credential_values::GitCredentials`] of this operation
//!    (the source reads them before every fetch; a push uses the ambient
//!    ones);
//! 2. [`callbacks`] turns them into libgit2's remote callbacks, given the
//!    remote's SSH port ([`ssh_port`]);
//! 3. libgit2 asks for credentials as the remote demands them, and, over SSH
//!    with a known_hosts given, hands the server's host key to the check of
//!    [`known_hosts`] before anything is sent;
//! 4. on failure the caller words the error with [`redact_url`] and
//!    [`credential_values::GitCredentials::scrub`], and tells an untrusted TLS
//!    certificate apart with [`is_untrusted_certificate`].
//!
//! Guarantees: credentials are handed to libgit2 only, never logged, and no
//! message built here names one; a password in a URL is left out of every
//! message that uses [`redact_url`]. Credentials offered, in order: the
//! configured token (HTTPS) or key (SSH), then the token in [`TOKEN_ENV`],
//! Git's credential helper (`credential.helper`), the ssh-agent. At most
//! three are offered before the operation fails.
//!
//! Assumptions: TLS certificates are verified by libgit2 itself (the
//! certificate check passes them through); only SSH host keys are checked
//! here.
//!
//! This module imports nothing above it: sources and the plugin use it.

pub(crate) mod credential_values;
pub(crate) mod known_hosts;

use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

use credential_values::{DEFAULT_TOKEN_USERNAME, GitCredentials};
use known_hosts::HostKeyError;

/// How long connecting to a Git host may take.
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a connected Git host may stay silent before a fetch or push
/// gives up: a host that accepts the connection and never answers would
/// otherwise hold the sync (or the plugin) forever.
pub(crate) const SERVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Sets libgit2's network timeouts (`CONNECT_TIMEOUT`, `SERVER_TIMEOUT`).
/// libgit2 keeps them process-wide: call this first thing in `main`, before
/// any thread uses Git.
#[allow(unsafe_code)]
pub fn set_network_timeouts() {
    let millis = |d: std::time::Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: called from `main` before any other thread exists or any Git
    // operation runs, as libgit2's global options require.
    unsafe {
        let _ = git2::opts::set_server_connect_timeout_in_milliseconds(millis(CONNECT_TIMEOUT));
        let _ = git2::opts::set_server_timeout_in_milliseconds(millis(SERVER_TIMEOUT));
    }
}

/// Environment variable holding an access token for HTTPS pushes and
/// fetches.
pub const TOKEN_ENV: &str = "CAMELK_GIT_TOKEN";

/// libgit2's callbacks: credentials as the remote asks for them, and the
/// host key check when a known_hosts is given. Fetches and the plugin's
/// pushes ([`crate::git::Checkout::push`]) offer credentials the same way.
pub(crate) fn callbacks<'a>(
    credentials: &'a GitCredentials,
    config: Option<&'a git2::Config>,
    port: u16,
) -> RemoteCallbacks<'a> {
    let env_token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let mut attempts = 0;
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(move |url, username, allowed| {
        attempts += 1;
        if attempts > 3 {
            return Err(git2::Error::from_str(
                "the remote refused every credential offered",
            ));
        }
        offer(
            credentials,
            env_token.as_deref(),
            config,
            url,
            username,
            allowed,
        )
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

/// The credential to offer for one request of the remote, in the order the
/// module doc gives.
fn offer(
    credentials: &GitCredentials,
    env_token: Option<&str>,
    config: Option<&git2::Config>,
    url: &str,
    username: Option<&str>,
    allowed: CredentialType,
) -> Result<Cred, git2::Error> {
    if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
        let token = credentials.token.as_ref().map(|t| t.expose()).or(env_token);
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
}

/// Whether `e` is TLS refusing the remote's certificate (not an SSH host
/// key, which libgit2 reports with the same code).
pub(crate) fn is_untrusted_certificate(e: &git2::Error) -> bool {
    e.class() == git2::ErrorClass::Ssl && e.code() == git2::ErrorCode::Certificate
}

/// `url` with the password of its `user:password@` part replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
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

/// The port of an SSH remote URL: `ssh://[user@]host[:port]/path` (also
/// `ssh+git://`, `git+ssh://`), or 22 (also for `user@host:path`).
pub(crate) fn ssh_port(url: &str) -> u16 {
    let Some((_, rest)) = url.split_once("://") else {
        return 22;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once("]:").map(|(_, p)| p),
        None => host_port.split_once(':').map(|(_, p)| p),
    };
    port.and_then(|p| p.parse().ok()).unwrap_or(22)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn ports_come_from_the_url() {
        assert_eq!(ssh_port("ssh://git@git.example.com:2222/a/b.git"), 2222);
        assert_eq!(ssh_port("ssh://git.example.com/a/b.git"), 22);
        assert_eq!(ssh_port("ssh://git@[::1]:2200/a.git"), 2200);
        assert_eq!(ssh_port("git@github.com:org/repo.git"), 22);
    }
}
