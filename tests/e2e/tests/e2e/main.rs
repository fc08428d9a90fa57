//! The end-to-end tests of the control plane itself and of the deployment
//! manifests, in one test binary so that they share one control plane
//! ([`camelk_testkit::shared`], started once per process) instead of
//! starting one per file. Each test works in namespaces of its own, except
//! `deploy`, which applies `examples/deploy` (its own namespaces
//! `camelk-system` and `camel-apps`, roles bound to its own service
//! accounts), nothing the other tests read, and `chart`, which dry-runs the
//! Helm chart into a namespace of its own (`camelk-chart`). `flux` runs real
//! Flux controllers that watch only its own namespace, and shares with the
//! others only Flux's CRDs, namespace (`flux-system`) and RBAC, which it
//! applies idempotently.
//!
//! `upstream_smoke` has a binary (and control plane) of its own: the
//! upstream Camel K operator it runs is global and acts as `operator-1` on
//! every namespace, so it would write to the Integrations `control_plane`
//! gives that owner, whose tests expect nothing but themselves to write.

mod chart;
mod control_plane;
mod deploy;
mod flux;
mod ha;
mod image;
mod workloads;
