//! Where the Go binaries come from: the control plane (`CAMELK_CONTROL_PLANE_BIN`
//! when set, otherwise `tests/control-plane/build.sh`), KWOK (`CAMELK_KWOK_BIN`,
//! otherwise `tests/kwok/build.sh`), upstream Camel K (`tests/camel-k/build.sh`),
//! Helm (`tests/helm/build.sh`) and Flux (`tests/flux/build.sh`).
//! Each script builds from the Go module proxy once per pinned version and
//! prints the cached directory.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use camelk_reconciler::preflight::pinned;

use crate::Error;

pub const BIN_ENV: &str = "CAMELK_CONTROL_PLANE_BIN";

/// Set by `make unit`, which runs only the tests that need no Go-built
/// binary: asking for one (the control plane, KWOK, Camel K, Helm, Flux)
/// then fails at once and names the variable, instead of building or starting
/// it. A test binary that fails so belongs out of the Makefile's `UNIT_TESTS`.
pub const UNIT_ONLY_ENV: &str = "CAMELK_UNIT_ONLY";

fn refuse_under_make_unit(what: &str) -> Result<(), Error> {
    match std::env::var_os(UNIT_ONLY_ENV) {
        Some(_) => Err(Error::Build(format!(
            "{what} asked for while {UNIT_ONLY_ENV} is set: `make unit` runs no Go-built \
             binary, so this test binary does not belong in the Makefile's UNIT_TESTS"
        ))),
        None => Ok(()),
    }
}

/// Directory holding `etcd`, `kube-apiserver`, `kube-controller-manager` and `kube-scheduler`.
pub fn control_plane_bin_dir() -> Result<PathBuf, Error> {
    refuse_under_make_unit("the control plane")?;
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
    refuse_under_make_unit("KWOK")?;
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

/// The Camel K pins (`tests/camel-k/versions.env`), which the build scripts
/// and the Makefile read too.
const CAMEL_K_PINS: &str = include_str!("../../camel-k/versions.env");

/// The upstream Camel K release tests run (`tests/camel-k/<version>/go.mod`).
pub const CAMEL_K_VERSION: &str = pinned(CAMEL_K_PINS, "CAMEL_K_VERSION");

/// The older release the demo upgrades from.
pub const CAMEL_K_PREVIOUS_VERSION: &str = pinned(CAMEL_K_PINS, "CAMEL_K_PREVIOUS_VERSION");

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
    refuse_under_make_unit(script)?;
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

const CONTROL_PLANE_PINS: &str = include_str!("../../control-plane/versions.env");

/// The Kubernetes version the control plane is built at (`tests/control-plane/versions.env`).
pub fn pinned_kube_version() -> &'static str {
    const { pinned(CONTROL_PLANE_PINS, "KUBE_VERSION") }
}

/// The etcd version the control plane is built at.
pub fn pinned_etcd_version() -> &'static str {
    const { pinned(CONTROL_PLANE_PINS, "ETCD_VERSION") }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What bash reads from `file` (relative to `tests/`) for `key`.
    fn sourced(file: &str, key: &str) -> String {
        let path = format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"));
        let script = format!(". \"$1\" && printf %s \"${key}\"");
        let out = Command::new("bash")
            .args(["-c", &script, "bash", &path])
            .output()
            .expect("run bash");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn the_pins_are_those_the_scripts_read() {
        let camel_k = "camel-k/versions.env";
        assert_eq!(CAMEL_K_VERSION, sourced(camel_k, "CAMEL_K_VERSION"));
        assert_eq!(
            CAMEL_K_PREVIOUS_VERSION,
            sourced(camel_k, "CAMEL_K_PREVIOUS_VERSION")
        );
        let control_plane = "control-plane/versions.env";
        assert_eq!(
            pinned_kube_version(),
            sourced(control_plane, "KUBE_VERSION")
        );
        assert_eq!(
            pinned_etcd_version(),
            sourced(control_plane, "ETCD_VERSION")
        );
        // Each release has its module.
        for version in [CAMEL_K_VERSION, CAMEL_K_PREVIOUS_VERSION] {
            let go_mod = crate::workspace_root().join(format!("tests/camel-k/{version}/go.mod"));
            assert!(go_mod.is_file(), "{} is missing", go_mod.display());
        }
    }

    #[test]
    fn a_key_is_read_whole_and_trimmed() {
        let env = "# A=0\nAB=2 \nA=1";
        assert_eq!(pinned(env, "A"), "1");
        assert_eq!(pinned(env, "AB"), "2");
    }
}
