//! Library behind the `reconciler` binary and the `kubectl camelk` plugin.
//!
//! It decides which Apache Camel K operator owns each Camel K resource and moves
//! resources between operators without two operators ever writing the same one.
//!
//! Data flows one way through the modules:
//!
//! ```text
//! Git / cluster sources ─▶ desired model ─▶ plan (pure) ─▶ executor (handoff) ─▶ cluster
//! ```
//!
//! Start with [`camel_k`], the catalogue of the upstream Camel K kinds and the
//! owner key every one of them carries.

pub mod camel_k;
