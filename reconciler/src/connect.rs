//! Connecting to a cluster the way kubectl does: `--kubeconfig` wins over
//! `$KUBECONFIG` (a list merged first-wins, missing files skipped), which wins
//! over `~/.kube/config`; then the
//! context given or the current one; in a Pod without any of these, the
//! in-cluster service account.
//!
//! A user whose kubeconfig runs an exec credential plugin (`users[].user.exec`)
//! gets it run by [`run_exec_plugin`] with a time limit: kube runs it with no
//! limit, blocking the thread, so a plugin that hangs (waiting for a browser
//! login, a dead SSO endpoint) would hang the command forever.
//!
//! Every kubeconfig file is read through `read_kubeconfig`, which refuses
//! what would make kube's reader panic instead of returning an error.

use std::path::Path;
use std::time::Duration;

/// How long an exec credential plugin may run when the caller gives no
/// limit of its own: 30 s.
///
/// Why this value: kubectl's plugins (`aws eks get-token`, `gke-gcloud-auth-plugin`,
/// `kubelogin` with a cached token) answer in a second or two; 30 s leaves
/// room for a slow network and still ends a command that would otherwise wait
/// forever. `--request-timeout` overrides it (`0`: no limit).
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(30);

use kube::config::{Kubeconfig, KubeconfigError};

/// Why no client configuration could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig file could not be read or parsed.
    #[error("reading kubeconfig {path}: {source}")]
    Read {
        /// The file's path.
        path: String,
        /// kube's error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The chosen context cannot be loaded (kube's error).
    #[error("loading the kubeconfig context: {0}")]
    Context(#[source] kube::config::KubeconfigError),
    /// `$KUBECONFIG` names only files that do not exist.
    #[error("none of the files in $KUBECONFIG exists")]
    EmptyList,
    /// The files of `$KUBECONFIG` cannot be merged (kube's error).
    #[error("merging $KUBECONFIG: {0}")]
    Merge(#[source] kube::config::KubeconfigError),
    /// No kubeconfig and no in-cluster service account (kube's error).
    #[error("no kubeconfig found and not running in a cluster: {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The kubeconfig's exec credential plugin did not answer in time (it was killed).
    #[error(
        "the kubeconfig's exec credential plugin `{command}` did not answer within {}s and was \
         stopped; check that it runs on its own (a login it waits for?), or allow it longer \
         with --request-timeout",
        .timeout.as_secs_f64()
    )]
    ExecTimeout {
        /// The plugin's command.
        command: String,
        /// The limit it exceeded.
        timeout: Duration,
    },
    /// The kubeconfig's exec credential plugin failed or printed no credential.
    #[error("the kubeconfig's exec credential plugin `{command}` failed: {message}")]
    Exec {
        /// The plugin's command.
        command: String,
        /// What went wrong.
        message: String,
    },
}

/// The client configuration for `kubeconfig` (or the environment) and `context`.
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Config, ConnectError> {
    use kube::config::KubeConfigOptions;
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let loaded = match kubeconfig {
        Some(path) => Some(read_kubeconfig(path)?),
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(list) => Some(merged(&list)?),
            // `~/.kube/config` as kube finds it; unreadable, as if absent.
            None => std::env::home_dir()
                .map(|home| home.join(".kube").join("config"))
                .and_then(|path| read_kubeconfig(&path).ok()),
        },
    };
    match loaded {
        Some(kc) => kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(ConnectError::Context),
        None => kube::Config::infer().await.map_err(ConnectError::Infer),
    }
}

/// The clients of a process that holds a lock (the sync, the reference
/// operator): one for its work, and one of the lock's own.
#[derive(Clone)]
pub struct Clients {
    /// Everything but the lock: kube's default client, which waits out a
    /// refusal's `Retry-After` (429, 503, 504) before it asks again.
    pub work: kube::Client,
    /// The lock's renewals: its own connections, and a refused request asked
    /// again within tens of milliseconds. API Priority and Fairness answers
    /// `Retry-After: 1`; a renewal that waits that long, twice, while the
    /// process's own work holds its few seats, outlives its renew deadline and
    /// gives up a lock it would have kept (seen under a throttle: two 429s a
    /// second apart, then the round's time ran out). The round's deadline
    /// bounds the retries.
    pub lock: kube::Client,
}

/// How the lock's client asks again: 25 ms, doubling to 250 ms, 40 times at
/// most (the round's deadline ends it first: 10 s by default).
const LOCK_RETRIES: (Duration, Duration, u32) =
    (Duration::from_millis(25), Duration::from_millis(250), 40);

impl Clients {
    /// Both clients, for the cluster and user of `config`. Called inside a
    /// Tokio runtime: the lock client's buffer is a task of it.
    pub fn new(mut config: kube::Config) -> Result<Clients, kube::Error> {
        use kube::client::retry::RetryPolicy;
        use tower::ServiceBuilder;
        use tower::buffer::BufferLayer;
        use tower::retry::RetryLayer;
        let work = kube::Client::try_from(config.clone())?;
        let (min, max, times) = LOCK_RETRIES;
        let policy = RetryPolicy::new(min, max, times, false).expect("valid lock retries");
        config.default_retry = false;
        let lock = kube::client::ClientBuilder::try_from(config)?
            // The retry clones the service it asks again; a buffer makes kube's
            // boxed stack one that can be cloned.
            .with_layer(
                &ServiceBuilder::new()
                    .layer(RetryLayer::new(policy))
                    .layer(BufferLayer::new(64))
                    .into_inner(),
            )
            .build();
        Ok(Clients { work, lock })
    }
}

/// `$KUBECONFIG` as kubectl reads it: files that do not exist are skipped,
/// the first file to set a value wins.
pub fn merged(list: &std::ffi::OsStr) -> Result<Kubeconfig, ConnectError> {
    let mut merged: Option<Kubeconfig> = None;
    for path in std::env::split_paths(list).filter(|p| p.exists()) {
        let next = read_kubeconfig(&path)?;
        merged = Some(match merged {
            Some(first) => first.merge(next).map_err(ConnectError::Merge)?,
            None => next,
        });
    }
    merged.ok_or(ConnectError::EmptyList)
}

/// What an exec plugin prints (`ExecCredential`); only what decides whether
/// its token can be used as is.
#[derive(serde::Deserialize)]
struct ExecCredential {
    status: Option<ExecStatus>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    token: Option<String>,
    expiration_timestamp: Option<String>,
}

/// Runs the exec credential plugin of `config`'s user, if it has one, and
/// gives up after `timeout` (`None`: no limit), killing it.
///
/// Flow: the plugin runs as kube would run it (its args and env, and
/// `KUBERNETES_EXEC_INFO` with `interactive: false`), stdin closed, its
/// stderr shown. A token without an expiry then replaces the exec entry (kube
/// would only run the plugin again for the same token); a token that expires,
/// or a client certificate, leaves the entry for kube, which refreshes it:
/// that second run is known to answer.
pub async fn run_exec_plugin(
    config: &mut kube::Config,
    timeout: Option<Duration>,
) -> Result<(), ConnectError> {
    let Some(exec) = config.auth_info.exec.clone() else {
        return Ok(());
    };
    let program = exec.command.clone().unwrap_or_default();
    let command = std::iter::once(program.as_str())
        .chain(exec.args.iter().flatten().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let failed = |message: String| ConnectError::Exec {
        command: command.clone(),
        message,
    };
    if program.is_empty() {
        return Err(failed("the exec entry names no command".into()));
    }
    let mut child = tokio::process::Command::new(&program);
    child.args(exec.args.iter().flatten());
    for var in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (var.get("name"), var.get("value")) {
            child.env(name, value);
        }
    }
    for name in exec.drop_env.iter().flatten() {
        child.env_remove(name);
    }
    let mut spec = serde_json::json!({ "interactive": false });
    if exec.provide_cluster_info
        && let Some(cluster) = &exec.cluster
    {
        spec["cluster"] = serde_json::to_value(cluster).unwrap_or_default();
    }
    let info = serde_json::json!({
        "apiVersion": exec.api_version,
        "kind": "ExecCredential",
        "spec": spec,
    });
    child
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        // On a timeout the future is dropped: the plugin with it.
        .kill_on_drop(true);
    let output = child.output();
    let output =
        match timeout {
            Some(limit) => tokio::time::timeout(limit, output).await.map_err(|_| {
                ConnectError::ExecTimeout {
                    command: command.clone(),
                    timeout: limit,
                }
            })?,
            None => output.await,
        }
        .map_err(|e| failed(format!("cannot start it: {e}")))?;
    if !output.status.success() {
        return Err(failed(format!("it exited with {}", output.status)));
    }
    let credential: ExecCredential = serde_saphyr::from_slice(&output.stdout)
        .map_err(|e| failed(format!("it printed no ExecCredential: {e}")))?;
    if let Some(ExecStatus {
        token: Some(token),
        expiration_timestamp: None,
    }) = credential.status
    {
        config.auth_info.token = Some(token.into());
        config.auth_info.exec = None;
    }
    Ok(())
}

/// kube's `Kubeconfig::read_from`, which takes UTF-8 and, after a byte-order
/// mark, UTF-16; but a UTF-16 file of an odd number of bytes makes it panic
/// (kube-client 5.0 reads the last code unit's second byte out of bounds),
/// so such a file is refused here as the invalid text it is.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, ConnectError> {
    let error = |source| ConnectError::Read {
        path: path.display().to_string(),
        source,
    };
    if let Ok(bytes) = std::fs::read(path)
        && matches!(bytes.as_slice(), [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..])
        && !bytes.len().is_multiple_of(2)
    {
        let invalid = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "UTF-16 text of an odd number of bytes",
        );
        return Err(error(KubeconfigError::ReadConfig(invalid, path.into())));
    }
    Kubeconfig::read_from(path).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Found by the `kubeconfig` fuzz target: kube's reader panicked on it.
    #[test]
    fn a_utf16_kubeconfig_of_an_odd_length_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let text = "apiVersion: v1\nkind: Config\ncurrent-context: team\n";
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let even = dir.path().join("even");
        std::fs::write(&even, &utf16).unwrap();
        let odd = dir.path().join("odd");
        std::fs::write(&odd, &utf16[..utf16.len() - 1]).unwrap();

        let list = std::env::join_paths([&even, &dir.path().join("missing")]).unwrap();
        let config = merged(&list).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("team"));

        let list = std::env::join_paths([&even, &odd]).unwrap();
        let error = merged(&list).unwrap_err().to_string();
        assert!(error.contains("odd number of bytes"), "{error}");
        assert!(read_kubeconfig(&odd).is_err());
    }
}
