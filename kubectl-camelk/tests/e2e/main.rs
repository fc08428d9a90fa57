//! The plugin's end-to-end tests on a real control plane, in one test binary
//! so that they share one control plane ([`camelk_testkit::shared`], started
//! once per process) instead of starting one per file. Each test works in
//! namespaces of its own; what is cluster-wide is only added, idempotently and
//! the same for every test: the `OperatorAssignment` CRD (server-side apply of
//! the generated definition) and the reconciler's shipped ClusterRole
//! ([`camelk_testkit::TestCluster::grant_camelk_roles`]). Operators run under
//! the shipped operator Roles in the test's namespace
//! ([`camelk_testkit::TestCluster::grant_operator`]).
//!
//! Not here, each in a binary (and control plane) of its own:
//!
//! - `missing_crds` needs a control plane without some Camel K CRDs, and
//!   installs and deletes CRDs while it runs;
//! - `upstream_move` runs real upstream Camel K operators, global, acting as
//!   `operator-1` and `operator-2` on every namespace: they would reconcile
//!   the resources the tests here give those owners;
//! - the tests that need no cluster (`commands`, `ci_output`, `malformed`,
//!   `plugin`, `push*`).

#[path = "../common/mod.rs"]
mod common;

mod check;
mod check_scopes;
mod faults;
mod live;
mod live_move;
mod live_sync;
mod served_plan;
