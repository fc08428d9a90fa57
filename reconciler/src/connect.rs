//! Connecting to a cluster the way kubectl does: `--kubeconfig` wins over
//! `$KUBECONFIG` (a merged list), which wins over `~/.kube/config`; then the
//! context given or the current one; in a Pod without any of these, the
//! in-cluster service account.

use std::path::Path;

/// Why no client configuration could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading kubeconfig {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("loading the kubeconfig context: {0}")]
    Context(#[source] kube::config::KubeconfigError),
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
        None => match Kubeconfig::from_env().map_err(|source| ConnectError::Read {
            path: "$KUBECONFIG".into(),
            source,
        })? {
            Some(merged) => Some(merged),
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
