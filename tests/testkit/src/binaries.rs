//! Where the control-plane binaries come from: `CAMELK_CONTROL_PLANE_BIN`
//! when set, otherwise `tests/control-plane/build.sh`, which builds them from
//! the Go module proxy once per pinned version and prints the cached directory.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::Error;

pub const BIN_ENV: &str = "CAMELK_CONTROL_PLANE_BIN";

/// Directory holding `etcd`, `kube-apiserver` and `kube-controller-manager`.
pub fn control_plane_bin_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let script = crate::workspace_root().join("tests/control-plane/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::Build(format!("cannot run {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(Error::Build(format!(
            "{} failed ({})",
            script.display(),
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
