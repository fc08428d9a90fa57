//! Connecting to a cluster the way kubectl does: `--kubeconfig` wins over
//! `$KUBECONFIG` (a list merged first-wins, missing files skipped), which wins
//! over `~/.kube/config`; then the
//! context given or the current one; in a Pod without any of these, the
//! in-cluster service account.

use std::path::Path;

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
