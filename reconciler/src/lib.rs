//! Library behind the `reconciler` binary and the `kubectl camelk` plugin.
//!
//! It decides which Apache Camel K operator owns each Camel K resource and moves
//! resources between operators without two operators ever writing the same one.
//!
//! Data flows one way through the modules:
//!
//! ```text
//! Git / cluster sources ─▶ desired model ─▶ plan (pure) ─▶ executor (handoff) ─▶ cluster
//!   git/, source/,         manifest/          plan/         handoff/
//!   inventory/
//! ```
//!
//! A module imports only modules of lower layers (or, without a cycle, of its
//! own); `tests/layers.rs` fails on an import against this order.
//!
//! Layers, top to bottom:
//!
//! ```text
//! sync
//! operator fleet
//! handoff
//! plan
//! manifest
//! source inventory
//! lock connect preflight git field_manager
//! api
//! camel_k
//! ```
//!
//! Start with [`camel_k`], the catalogue of the upstream Camel K kinds, the
//! owner key every one of them carries and the phases upstream writes; then
//! [`api`] (the `OperatorAssignment` kept in Git), [`manifest`] (reading,
//! checking and editing it, and the desired owner of each resource) and
//! [`plan`] (what a manifest change does to the cluster). [`handoff`] moves
//! resources; `sync` is the GitOps loop on top of everything.
//!
//! # The public surface
//!
//! What the plugin, the `reconciler` binary, the tests, benches, `xtask` and
//! `fuzz/` use, and nothing else: the top-level modules below whose names are
//! `pub`, each re-exporting at its own level the items of its private
//! submodules that callers need (`handoff::Coordinator`,
//! `inventory::read_file`, `camel_k::phase`, ...). Four submodules stay
//! public because they are namespaces of their own: [`manifest::edit`] (the
//! edit verbs), [`manifest::owner_keys`] (stripping owner keys from a GitOps
//! repository), [`handoff::fence`] (the fenced patches, pure) and
//! [`inventory::watch`] (the watch cache). Everything else is `pub(crate)`.
//! `reconciler/public-api.txt` lists the surface and `tests/public_api.rs`
//! fails when it changes: a new `pub` item is a decision taken in review.
//!
//! Features, both default: `server` (the `sync` loop and its HTTP
//! endpoints) and `reference-operator` (`operator`, the scoped operator loops
//! of `reconciler operator`: a test double of an operator that takes part in
//! handoffs, not what users run). The plugin enables neither.

#![warn(missing_docs, unreachable_pub)]

pub mod api;
pub mod camel_k;
pub mod connect;
// One function of its own layer; callers use the re-export below.
mod field_manager;
pub mod fleet;
pub mod git;
pub mod handoff;
pub mod inventory;
pub mod lock;
pub mod manifest;
// The reference operator is a test double of an operator that takes part in
// the handoff protocol; the plugin does not link it.
#[cfg(feature = "reference-operator")]
pub mod operator;
pub mod plan;
pub mod preflight;
pub mod source;
#[cfg(feature = "server")]
pub mod sync;

pub use field_manager::update_as;
