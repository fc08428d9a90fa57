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
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let loaded = match kubeconfig {
        Some(path) => Some(
            Kubeconfig::read_from(path).map_err(|source| ConnectError::Read {
                path: path.display().to_string(),
                source,
            })?,
        ),
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(list) => Some(merged(&list)?),
            None => Kubeconfig::read().ok(),
        },
    };
    match loaded {
        Some(kc) => kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(ConnectError::Context),
        None => kube::Config::infer().await.map_err(ConnectError::Infer),
    }
}

/// `$KUBECONFIG` as kubectl reads it: files that do not exist are skipped,
/// the first file to set a value wins.
fn merged(list: &std::ffi::OsStr) -> Result<kube::config::Kubeconfig, ConnectError> {
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in std::env::split_paths(list).filter(|p| p.exists()) {
        let next =
            kube::config::Kubeconfig::read_from(&path).map_err(|source| ConnectError::Read {
                path: path.display().to_string(),
                source,
            })?;
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
