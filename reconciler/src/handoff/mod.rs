//! The handoff protocol: moving a Camel K resource from operator A to
//! operator B so that at no instant may both write it.
//!
//! See `docs/handoff.md` for the state diagram. In short:
//!
//! # Expected flow
//! 1. The coordinator (`kubectl camelk move`, or the GitOps sync) checks that
//!    B is alive (its lock Lease is seen renewing) and writes one handoff
//!    request: a Lease in the resources' namespace, owned by all of them
//!    ([`request`]).
//! 2. A sees the request in its filtered watch. It finishes the work in
//!    flight on each resource, starts none, and when `crate::camel_k::release::owner_may_release`
//!    allows, flips owner label and annotation to B in one fenced write
//!    ([`fence::flip`]).
//! 3. The resource leaves A's filtered watch and enters B's; B reconciles it
//!    (its first act may be a rebuild, as upstream does).
//! 4. When every resource of the request is flipped or gone, the coordinator
//!    deletes the Lease ([`executor`]).
//!
//! # Guarantees
//! - Every write an operator makes to a resource it owns is a JSON patch
//!   whose first op tests the owner label (`fence::fenced`); once the label
//!   names B, the API server refuses every write of A, however late.
//! - A change of owner is one write, label and annotation together.
//! - Nothing but the two owner keys (and status, by its owner) is ever
//!   written to a user's resource; nothing deletes one.
//!
//! # Other paths
//! - Upstream operators (annotation only, no protocol): the coordinator
//!   releases for them, in a stable phase only, with a guard on that phase.
//! - A dead owner (lock not seen renewing for a lease duration): the
//!   coordinator takes over with the same fenced flip.
//! - A live owner that does not release within the drain timeout: the
//!   request is marked `Stalled` with the reason; it is forced only under
//!   [`request::ForcePolicy::AfterDrainTimeout`].
//! - A target that dies: the coordinator withdraws the request; what was
//!   moved stays moved, the rest stays with A.

pub mod executor;
pub mod fence;
pub mod request;

pub use executor::{Coordinator, FLIPS_IN_FLIGHT, HandoffOptions, HandoffOutcome, MoveBatch};
pub use request::{ForcePolicy, HandoffItem, HandoffRequest, HandoffSpec, ReleaseMode};

/// The field manager of the handoff's writes (owner keys, a request's
/// state), whoever sends them: the coordinator in `reconciler sync` or
/// `kubectl camelk`, or an operator releasing. `managedFields` then says
/// which owner keys the handoff set; without one the API server records
/// `unknown`.
pub const FIELD_MANAGER: &str = "camelk-handoff";
