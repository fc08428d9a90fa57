//! A real Kubernetes control plane on loopback, for tests and for the programs
//! of `xtask/` (the demo, `make local-cluster`).
//!
//! etcd, kube-apiserver and kube-controller-manager are built from upstream
//! Go modules by `tests/control-plane/build.sh` (see [`binaries`]) and started
//! by [`cluster::start`] with RBAC, static-token users ([`identity`]), an audit
//! log ([`audit`]) and the Camel K CRDs ([`crds`]); kube-scheduler and KWOK
//! give Deployments ready pods on a simulated node. [`upstream`] runs real
//! upstream Camel K operators (`kamel operator`) on it, and [`flux`] real
//! Flux controllers.
//!
//! Tests use [`fixture::shared`]: one control plane per test binary, a fresh
//! namespace per test. Each crate keeps its end-to-end tests in one binary
//! (`tests/e2e/main.rs`, a module per topic) so that they share one control
//! plane; [`manifest`] builds the `OperatorAssignment` manifests they push, and
//! [`scenario`] the world a test starts from (namespace, resources, manifest,
//! Git remote).
//!
//! ```no_run
//! # async fn example() {
//! let cluster = camelk_testkit::shared();
//! let ns = cluster.namespace("my-test").await;
//! let client = cluster.client_as("operator-1").await;
//! # let _ = (ns, client);
//! # }
//! ```

pub mod admission;
pub mod apf;
pub mod approvals;
pub mod apps_repo;
pub mod audit;
pub mod binaries;
pub mod cli;
pub mod cluster;
pub mod crds;
pub mod fixture;
pub mod flux;
pub mod git_http;
pub mod identity;
#[cfg(feature = "in-process-sync")]
pub mod in_process_sync;
pub mod layers;
pub mod manifest;
pub mod operator_rbac;
pub mod pki;
pub mod pod;
pub mod poll;
pub mod prometheus;
pub mod proxy;
pub mod receiver;
pub mod reconciler_rbac;
pub mod scenario;
pub mod upstream;
pub mod watchdog;

use std::path::PathBuf;

pub use audit::{AuditEvent, AuditLog};
pub use fixture::{TestCluster, TestNamespace, shared};
pub use scenario::{GitRemote, Scenario, World};
pub use upstream::{UpstreamOperator, UpstreamOptions};

/// Failures of starting, stopping or preparing a control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("building the control-plane binaries: {0}")]
    Build(String),
    #[error("{0}")]
    AlreadyRunning(String),
    #[error("starting {process}: {message}")]
    Start { process: String, message: String },
    #[error("installing CRDs: {0}")]
    Crd(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    /// An object did not reach the state a test waited for in time.
    /// `conditions` are the last it showed; `message` says what was awaited
    /// and names the condition that changed last.
    #[error("{object}: {message}")]
    NotReady {
        object: String,
        conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
        message: String,
    },
}

/// Panics unless the process of `output` exited 0, naming `what` and what
/// the process wrote to stderr, so a failed command says why.
pub fn assert_success(output: &std::process::Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The items of JSON array `list`, each a string; panics on anything else.
pub fn str_items(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| item.as_str().unwrap())
        .collect()
}

/// Field `key` of each item of JSON array `list`, each a string; panics on
/// anything else.
pub fn str_fields<'a>(list: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| item[key].as_str().unwrap())
        .collect()
}

/// This process's `PATH` with `dirs` in front, for a program a test runs
/// with binaries of its own on the path.
pub fn path_with(dirs: &[&std::path::Path]) -> String {
    let mut entries: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    entries.push(std::env::var("PATH").unwrap_or_default());
    entries.join(":")
}

/// Root of the Cargo workspace this crate belongs to.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lock timing of every `reconciler` process a test or benchmark starts:
/// a 4 s lease, so that a killed holder is noticed within seconds.
pub const SHORT_LOCK_ARGS: [&str; 6] = [
    "--lease-duration",
    "4s",
    "--renew-deadline",
    "3s",
    "--retry-period",
    "1s",
];

/// Binary `bin` of workspace package `package`, built by cargo on the first
/// call of the test process (debug; a no-op when it is up to date), so a test
/// never runs a stale one; later calls reuse that build's answer.
///
/// It is built as `make test` builds the workspace's tests (`cargo test
/// --workspace --no-run`, which builds the binaries they run): any other
/// selection (`cargo build -p <package>`, or `--all-targets` with the
/// benchmarks) resolves other features for shared dependencies, rebuilds
/// the package, and relinks `target/debug/<bin>` under the test binaries
/// running it at that moment (their `CARGO_BIN_EXE_<bin>`).
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<Vec<serde_json::Value>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(build_workspace_binaries)
        .iter()
        .filter(|m| {
            m["target"]["name"] == bin
                && m["package_id"]
                    .as_str()
                    .is_some_and(|id| package_id_names(id, package))
        })
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reports no executable {bin}"))
}

/// Builds the workspace's tests and returns cargo's messages about the
/// binaries they run.
fn build_workspace_binaries() -> Vec<serde_json::Value> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    // Without the variables cargo set for this test: build scripts that track
    // one (ring's tracks CARGO_MANIFEST_DIR) would be rerun, and everything
    // above them rebuilt, on every call from a test of another package.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_for_a_crate) {
            command.env_remove(&name);
        }
    }
    let out = command
        .current_dir(workspace_root())
        .args(["test", "--quiet", "--workspace", "--no-run"])
        .arg("--message-format=json")
        .output()
        .unwrap_or_else(|e| panic!("running cargo test --no-run: {e}"));
    assert_success(&out, "cargo test --workspace --no-run");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| {
            m["reason"] == "compiler-artifact"
                && m["target"]["kind"] == serde_json::json!(["bin"])
                // Not the bins' own unit tests, which are built too.
                && m["profile"]["test"] == false
        })
        .collect()
}

/// Whether cargo sets the environment variable `name` for the crate it
/// compiles or the test it runs (not a setting of cargo's own).
fn set_by_cargo_for_a_crate(name: &str) -> bool {
    const NAMES: [&str; 8] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    NAMES.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// Whether a cargo package id (`path+file:///…/reconciler#camelk-reconciler@0.1.0`,
/// or `path+file:///…/xtask#0.1.0` where the directory is the name) is `package`'s.
fn package_id_names(id: &str, package: &str) -> bool {
    match id.rsplit_once('#') {
        Some((_, spec)) if spec.contains('@') => spec.split('@').next() == Some(package),
        Some((url, _)) => url.rsplit('/').next() == Some(package),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{package_id_names, set_by_cargo_for_a_crate};

    #[test]
    fn the_variables_cargo_sets_for_a_test_are_told_from_its_settings() {
        for set in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_BIN_EXE_reconciler",
        ] {
            assert!(set_by_cargo_for_a_crate(set), "{set}");
        }
        for setting in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO",
            "CARGO_BUILD_JOBS",
        ] {
            assert!(!set_by_cargo_for_a_crate(setting), "{setting}");
        }
    }

    #[test]
    fn a_package_id_names_its_package_in_both_forms() {
        let named = "path+file:///work/main/reconciler#camelk-reconciler@0.1.0";
        assert!(package_id_names(named, "camelk-reconciler"));
        assert!(!package_id_names(named, "reconciler"));
        let by_dir = "path+file:///work/main/xtask#0.1.0";
        assert!(package_id_names(by_dir, "xtask"));
        assert!(!package_id_names(by_dir, "kubectl-camelk"));
    }
}
