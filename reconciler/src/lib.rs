//! Library behind the `reconciler` binary and the `kubectl camelk` plugin.
//!
//! It decides which Apache Camel K operator owns each Camel K resource and moves
//! resources between operators without two operators ever writing the same one.
//!
//! Data flows one way through the modules:
//!
//! ```text
//! Git / cluster sources ─▶ desired model ─▶ plan (pure) ─▶ executor (handoff) ─▶ cluster
//!   git/, inventory/      manifest/, api/      plan/
//! ```
//!
//! Start with [`camel_k`], the catalogue of the upstream Camel K kinds and the
//! owner key every one of them carries; then [`api`] (the `OperatorAssignment`
//! kept in Git), [`manifest`] (reading, checking and editing it) and [`plan`]
//! (what a manifest change does to the cluster).

pub mod api;
pub mod camel_k;
pub mod connect;
pub mod fleet;
pub mod git;
pub mod handoff;
pub mod inventory;
pub mod lock;
pub mod manifest;
pub mod operator;
pub mod plan;
pub mod preflight;
pub mod source;
pub mod sync;
