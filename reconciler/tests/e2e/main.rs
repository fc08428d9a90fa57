//! The end-to-end tests of the library and the `reconciler` binary on a real
//! control plane, in one test binary so that they share one control plane
//! ([`camelk_testkit::shared`], started once per process) instead of starting
//! one per file. Each test works in namespaces of its own
//! ([`camelk_testkit::TestCluster::namespace`]); what is cluster-wide is only
//! ever added, the same for every test, and idempotently (operators get the
//! shipped Roles of `examples/test-double-operator/operator/rbac.yaml` in the test's own
//! namespace, [`camelk_testkit::TestCluster::grant_operator`]): the Camel K and
//! `OperatorAssignment` CRDs (server-side apply of one definition), the
//! reconciler's shipped ClusterRole (`examples/deploy/reconciler/rbac.yaml`)
//! with its binding ([`camelk_testkit::TestCluster::grant_camelk_roles`]),
//! and the shipped
//! admission policy, whose bindings name one test namespace each
//! ([`camelk_testkit::admission`]), and API Priority and Fairness objects
//! that throttle only the `throttled` user, whom no other test acts as
//! ([`camelk_testkit::apf`]). No test deletes or changes any of these.
//!
//! Not here, each in a binary (and control plane) of its own:
//!
//! - `upstream` (`tests/upstream/main.rs`) runs real upstream Camel K
//!   operators. They are global (`WATCH_NAMESPACE` empty) and act as
//!   `operator-1`..`operator-3` on every namespace of the cluster, so they
//!   would reconcile the Integrations the tests here give those owners (and
//!   their RBAC binds those identities cluster-wide to upstream's role);
//! - the pure tests (`plan_scenarios`, `properties`, `validation`,
//!   `edit_golden`), which need no cluster.

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod handoff;
mod lifecycle;
mod outage;
mod recreated;
mod source;
mod sync;
mod throttle;
