//! Where the Go binaries come from: the control plane (`CAMELK_CONTROL_PLANE_BIN`
//! when set, otherwise `tests/control-plane/build.sh`), KWOK (`CAMELK_KWOK_BIN`,
//! otherwise `tests/kwok/build.sh`), upstream Camel K (`tests/camel-k/build.sh`),
//! Helm (`tests/helm/build.sh`) and Flux (`tests/flux/build.sh`).
//! Each script builds from the Go module proxy once per pinned version and
//! prints the cached directory.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::Error;

pub const BIN_ENV: &str = "CAMELK_CONTROL_PLANE_BIN";

/// Directory holding `etcd`, `kube-apiserver`, `kube-controller-manager` and `kube-scheduler`.
pub fn control_plane_bin_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        return Ok(PathBuf::from(dir));
    }
    run_build_script("tests/control-plane/build.sh", &[])
}

/// Overrides the directory holding `kwok` (otherwise built by `tests/kwok/build.sh`).
pub const KWOK_BIN_ENV: &str = "CAMELK_KWOK_BIN";

/// Directory holding `kwok`, which simulates the local control plane's node
/// and the status of the pods scheduled on it.
pub fn kwok_bin_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os(KWOK_BIN_ENV) {
        return Ok(PathBuf::from(dir));
    }
    run_build_script("tests/kwok/build.sh", &[])
}

/// Directory holding `helm` (pinned in `tests/helm/go.mod`), which lints and
/// renders the chart in `charts/`.
pub fn helm_bin_dir() -> Result<PathBuf, Error> {
    run_build_script("tests/helm/build.sh", &[])
}

/// Directory of the Flux release built by `tests/flux/build.sh` (pinned in
/// `tests/flux/*/go.mod`): `bin/source-controller`, `bin/kustomize-controller`
/// and `crds/*.yaml`. Builds it on first use (about 10 minutes on 2 cores),
/// then it is cached.
pub fn flux_dir() -> Result<PathBuf, Error> {
    run_build_script("tests/flux/build.sh", &[])
}

/// The upstream Camel K release tests run (`tests/camel-k/<version>/go.mod`).
pub const CAMEL_K_VERSION: &str = "v2.10.1";

/// The older release the demo upgrades from.
pub const CAMEL_K_PREVIOUS_VERSION: &str = "v2.8.0";

/// Directory of an upstream Camel K release built by `tests/camel-k/build.sh`:
/// `bin/kamel` (the real operator is `kamel operator`) and `crds/*.yaml`.
/// Builds it on first use (about 3 minutes on 2 cores), then it is cached.
pub fn camel_k_dir(version: &str) -> Result<PathBuf, Error> {
    run_build_script("tests/camel-k/build.sh", &[version])
}

/// The CRDs of an upstream Camel K release, copied out of its Go module
/// without building `kamel` (seconds, or nothing when cached).
pub fn camel_k_crds_dir(version: &str) -> Result<PathBuf, Error> {
    run_build_script("tests/camel-k/build.sh", &["--crds-only", version]).map(|d| d.join("crds"))
}

/// Runs a build script of the workspace and returns the directory it prints last.
fn run_build_script(script: &str, args: &[&str]) -> Result<PathBuf, Error> {
    let script = crate::workspace_root().join(script);
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::Build(format!("cannot run {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(Error::Build(format!(
            "{} {} failed ({})",
            script.display(),
            args.join(" "),
            out.status
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or_default().trim();
    if dir.is_empty() {
        return Err(Error::Build(format!(
            "{} printed no directory",
            script.display()
        )));
    }
    Ok(PathBuf::from(dir))
}

const VERSIONS: &str = include_str!("../../control-plane/versions.env");

/// The Kubernetes version the control plane is built at (`tests/control-plane/versions.env`).
pub fn pinned_kube_version() -> &'static str {
    pinned("KUBE_VERSION")
}

/// The etcd version the control plane is built at.
pub fn pinned_etcd_version() -> &'static str {
    pinned("ETCD_VERSION")
}

fn pinned(key: &str) -> &'static str {
    VERSIONS
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{key} missing from versions.env"))
}
