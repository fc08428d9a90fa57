//! A Deployment's pod run as a local process, as a kubelet would run it.
//!
//! No kubelet runs containers on the test control plane (KWOK only marks
//! pods ready), so a test that installs the reconciler from its chart or its
//! manifests starts each replica itself, from the pod template the API
//! server holds or Helm rendered:
//! - the first container's `args`, with `$(VAR)` expanded from its `env`
//!   (`metadata.name` is the replica's pod name, `metadata.namespace` the
//!   Deployment's namespace), and only the container's environment;
//! - each volume it mounts materialised under a directory of the replica's
//!   own: a Secret's or ConfigMap's keys as files, an emptyDir as an empty
//!   directory; every mount path in `args` and `env` is mapped to its
//!   directory (`/etc/camelk/webhook/secret` becomes
//!   `<replica>/etc/camelk/webhook/secret`);
//! - `--listen=HOST:PORT` becomes a loopback port of its own (several
//!   replicas on one machine), and `--kubeconfig` a file holding a
//!   TokenRequest token of the pod's ServiceAccount (what a pod's projected
//!   token is), so the API server authorises it by the RBAC the project ships.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::watchdog::Watchdog;

/// [`service_account_kubeconfig`] for the ServiceAccount that the pod
/// `template` runs as, in `ns`: the kubeconfig its replicas are started with.
pub async fn template_kubeconfig(
    cluster_kubeconfig: &Path,
    admin: &Client,
    ns: &str,
    template: &PodSpec,
    path: &Path,
) -> anyhow::Result<()> {
    let account = template
        .service_account_name
        .as_deref()
        .ok_or_else(|| anyhow!("the pod names no ServiceAccount"))?;
    service_account_kubeconfig(cluster_kubeconfig, admin, ns, account, path).await
}

/// A kubeconfig at `path` for the API server of `cluster_kubeconfig`, whose
/// user is ServiceAccount `ns/name` by a token from the TokenRequest API.
pub async fn service_account_kubeconfig(
    cluster_kubeconfig: &Path,
    admin: &Client,
    ns: &str,
    name: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("a token of ServiceAccount {ns}/{name}"))?
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| anyhow!("the TokenRequest of {ns}/{name} answered no token"))?;
    let clusters = Kubeconfig::read_from(cluster_kubeconfig)
        .context("the cluster's kubeconfig")?
        .clusters;
    let cluster_name = clusters
        .first()
        .map(|c| c.name.clone())
        .ok_or_else(|| anyhow!("the cluster's kubeconfig names no cluster"))?;
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": [{ "name": name, "user": { "token": token } }],
        "contexts": [{ "name": name, "context": { "cluster": cluster_name, "user": name } }],
        "current-context": name,
    });
    std::fs::write(path, serde_json::to_string(&config)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// One replica: the pod's first container, running as a local process.
/// Killed when dropped.
pub struct PodProcess {
    pod: String,
    address: std::net::SocketAddr,
    child: Child,
    log: PathBuf,
    watchdog: Option<Watchdog>,
}

impl Drop for PodProcess {
    fn drop(&mut self) {
        crate::watchdog::kill_and_reap(&mut self.child, &mut self.watchdog);
    }
}

impl PodProcess {
    /// The pod name it was started as.
    pub fn pod(&self) -> &str {
        &self.pod
    }

    /// Where its `--listen` address was moved to.
    pub fn address(&self) -> std::net::SocketAddr {
        self.address
    }

    /// The last `lines` lines of its output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Starts replica `pod_name` of a Deployment in `ns` whose pod template is
/// `pod`: `binary` in place of the container's image, under `kubeconfig`,
/// with its files under `scratch/<pod_name>` (see the module doc).
pub async fn start(
    admin: &Client,
    ns: &str,
    pod: &PodSpec,
    pod_name: &str,
    binary: &Path,
    kubeconfig: &Path,
    scratch: &Path,
) -> anyhow::Result<PodProcess> {
    let container = pod
        .containers
        .first()
        .ok_or_else(|| anyhow!("the pod has no container"))?;
    let root = scratch.join(pod_name);
    let mounts = materialise_volumes(admin, ns, pod, container, &root).await?;
    let mut env: Vec<(String, String)> = Vec::new();
    for var in container.env.iter().flatten() {
        let field = var
            .value_from
            .as_ref()
            .and_then(|from| from.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        let value = match (&var.value, field) {
            (Some(value), _) => mapped(value, &mounts),
            (None, Some("metadata.name")) => pod_name.to_string(),
            (None, Some("metadata.namespace")) => ns.to_string(),
            _ => bail!("env var {} comes from a source a test cannot set", var.name),
        };
        env.push((var.name.clone(), value));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let args: Vec<String> = container
        .args
        .iter()
        .flatten()
        .map(|arg| {
            let mut arg = arg.clone();
            for (name, value) in &env {
                arg = arg.replace(&format!("$({name})"), value);
            }
            match arg.split_once('=') {
                Some(("--listen", _)) => format!("--listen=127.0.0.1:{port}"),
                Some((flag, value)) => format!("{flag}={}", mapped(value, &mounts)),
                None => arg,
            }
        })
        .collect();
    std::fs::create_dir_all(scratch)?;
    let log = scratch.join(format!("{pod_name}.log"));
    let out = std::fs::File::create(&log)?;
    let child = Command::new(binary)
        .args(&args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        // Only the container's environment (a pod has no other).
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let watchdog = Watchdog::kill_on_exit(child.id()).ok();
    Ok(PodProcess {
        pod: pod_name.to_string(),
        address: ([127, 0, 0, 1], port).into(),
        child,
        log,
        watchdog,
    })
}

/// Materialises the volumes `container` mounts under `root`; returns (mount
/// path, directory), longest mount path first.
async fn materialise_volumes(
    admin: &Client,
    ns: &str,
    pod: &PodSpec,
    container: &k8s_openapi::api::core::v1::Container,
    root: &Path,
) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| anyhow!("the pod has no volume {}", mount.name))?;
        let dir = root.join(mount.mount_path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir)?;
        let files: Vec<(String, Vec<u8>)> = if let Some(secret) = &volume.secret {
            let name = secret.secret_name.as_deref().unwrap_or_default();
            Api::<Secret>::namespaced(admin.clone(), ns)
                .get(name)
                .await
                .with_context(|| format!("the pod mounts Secret {name}"))?
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect()
        } else if let Some(map) = &volume.config_map {
            Api::<ConfigMap>::namespaced(admin.clone(), ns)
                .get(&map.name)
                .await
                .with_context(|| format!("the pod mounts ConfigMap {}", map.name))?
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect()
        } else if volume.empty_dir.is_some() {
            Vec::new()
        } else {
            bail!(
                "volume {}: only Secret, ConfigMap and emptyDir volumes are materialised",
                volume.name
            );
        };
        for (key, bytes) in files {
            std::fs::write(dir.join(key), bytes)?;
        }
        mounts.push((mount.mount_path.clone(), dir));
    }
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    Ok(mounts)
}

/// `value` with a leading mount path mapped to its directory.
fn mapped(value: &str, mounts: &[(String, PathBuf)]) -> String {
    for (path, dir) in mounts {
        if let Some(rest) = value.strip_prefix(path.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{}{rest}", dir.display());
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_path_maps_only_at_a_path_boundary() {
        let mounts = vec![
            (
                "/etc/camelk/webhook".to_string(),
                PathBuf::from("/r/etc/camelk/webhook"),
            ),
            ("/cache".to_string(), PathBuf::from("/r/cache")),
        ];
        assert_eq!(
            mapped("/etc/camelk/webhook/secret", &mounts),
            "/r/etc/camelk/webhook/secret"
        );
        assert_eq!(mapped("/cache", &mounts), "/r/cache");
        assert_eq!(mapped("/cachet", &mounts), "/cachet");
        assert_eq!(
            mapped("https://example.com/cache", &mounts),
            "https://example.com/cache"
        );
    }
}
