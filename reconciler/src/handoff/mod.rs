//! The handoff protocol: moving a Camel K resource from operator A to
//! operator B so that at no instant may both write it.
//!
//! See `docs/handoff.md` for the state diagram. In short:
//!
//! # Expected flow
//! 1. The coordinator (`kubectl camelk move`, or the GitOps sync) checks that
//!    B is alive (its lock Lease is seen renewing) and writes one handoff
//!    request: a Lease in the resources' namespace, owned by all of them
//!    (`request`).
//! 2. A sees the request in its filtered watch. It finishes the work in
//!    flight on each resource, starts none, and when `crate::camel_k::release::owner_may_release`
//!    allows, flips owner label and annotation to B in one fenced write
//!    ([`fence::flip`]).
//! 3. The resource leaves A's filtered watch and enters B's; B reconciles it
//!    (its first act may be a rebuild, as upstream does).
//! 4. When every resource of the request is flipped or gone, the coordinator
//!    deletes the Lease (`coordinator`).
//!
//! # Guarantees
//! - Every write an operator makes to a resource it owns is a JSON patch
//!   whose first op tests the owner label (`fence::fenced`); once the label
//!   names B, the API server refuses every write of A, however late.
//! - A change of owner is one write, label and annotation together.
//! - Owner keys are sent only by `owner_writes`, whoever decides the
//!   write: a releasing operator, the coordinator or the sync.
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

pub(crate) mod coordinator;
pub mod fence;
pub(crate) mod owner_writes;
pub(crate) mod rbac;
pub(crate) mod request;

pub use coordinator::{
    Coordinator, HandoffError, HandoffOptions, HandoffOutcome, MoveBatch, Progress, Requested,
};
pub use owner_writes::{FLIPS_IN_FLIGHT, FlipResult, flip};
pub use rbac::{coordinator_cluster_role, operator_cluster_role};
pub use request::{
    FROM_LABEL, ForcePolicy, HandoffItem, HandoffRequest, HandoffSpec, ReleaseMode,
    STATE_ANNOTATION,
};

/// The field manager of the handoff's writes (owner keys, a request's
/// state), whoever sends them: the coordinator in `reconciler sync` or
/// `kubectl camelk`, or an operator releasing. `managedFields` then says
/// which owner keys the handoff set; without one the API server records
/// `unknown`.
pub(crate) const FIELD_MANAGER: &str = "camelk-handoff";

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::{Path, PathBuf};

    /// The library's sources, each with its comment lines removed, so that a
    /// doc naming an item is not taken for a use of it.
    fn sources_without_comments() -> Vec<(PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            for entry in fs::read_dir(dir).expect("read src/") {
                let path = entry.expect("read a src/ entry").path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = fs::read_to_string(&path).expect("read a source file");
                    let code: Vec<&str> = text
                        .lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .collect();
                    out.push((path, code.join("\n")));
                }
            }
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out = Vec::new();
        walk(&src, &mut out);
        out
    }

    // Owner keys have one writer: the fenced patches and the co-owning apply
    // are sent from `owner_writes` alone, and it never calls back into the
    // coordinator that uses it.
    #[test]
    fn owner_keys_are_sent_only_by_owner_writes_which_calls_no_coordinator() {
        let sources = sources_without_comments();
        let writer = Path::new("handoff").join("owner_writes.rs");
        let mut found = Vec::new();
        for (path, code) in &sources {
            let is_writer = path.ends_with(&writer);
            // Split, so this test's own text does not match.
            let sends = [
                concat!("fence::", "flip("),
                concat!("fence::", "assign("),
                concat!("PatchParams::", "apply(CO_OWNER)"),
            ];
            for send in sends {
                if code.contains(send) {
                    found.push(send);
                    assert!(is_writer, "{} sends owner keys ({send})", path.display());
                }
            }
            if is_writer {
                assert!(
                    !code.contains("coordinator") && !code.contains("Coordinator"),
                    "owner_writes.rs refers to the coordinator"
                );
            }
        }
        // Each send was seen, so the check above looked at the real writer.
        assert_eq!(found.len(), 3, "sends seen: {found:?}");
    }
}
