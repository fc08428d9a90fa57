//! What a round reads of live ownership: the watch cache
//! ([`super::owner_watch`]) when it can be trusted, else a list (metadata
//! only) of what the head and base manifests govern ([`Reach`]).

use std::collections::BTreeSet;
use std::time::Duration;

use kube::Client;

use super::{SyncError, owner_watch};
use crate::api::{OperatorAssignmentSpec, OperatorAssignmentStatus, RolloutState};
use crate::camel_k::CamelKind;
use crate::inventory::Inventory;
use crate::plan::rollout;

/// How long a round waits for the watch cache's initial lists before it
/// lists for itself.
pub(super) const CACHE_PATIENCE: Duration = Duration::from_secs(30);

/// Reads live ownership for the rounds.
pub(super) struct LiveReads {
    client: Client,
    /// Watched live ownership; without it every round lists.
    cache: Option<owner_watch::LiveCache>,
}

impl LiveReads {
    pub(super) fn new(client: Client) -> LiveReads {
        LiveReads {
            client,
            cache: None,
        }
    }

    /// Decides from `cache` whether a round has anything to do, so that a
    /// round in steady state lists nothing.
    pub(super) fn with_cache(&mut self, cache: owner_watch::LiveCache) {
        self.cache = Some(cache);
    }

    /// Live ownership: the watch cache, unless the round is about to act
    /// after this process wrote owner keys (`wrote_owners`: the cache may
    /// lag those writes).
    pub(super) async fn ownership(
        &self,
        head: &OperatorAssignmentSpec,
        status: &OperatorAssignmentStatus,
        sha: &str,
        reach: &Reach,
        wrote_owners: bool,
    ) -> Result<Inventory, SyncError> {
        let cached = match &self.cache {
            Some(live) => live.synced_snapshot(reach, CACHE_PATIENCE).await,
            None => None,
        };
        match cached {
            Some(cached) if wrote_owners && !idle(head, status, sha, &cached) => {
                self.read(reach).await
            }
            Some(mut cached) => {
                crate::inventory::metadata_list::mark_guarded(&self.client, &mut cached).await?;
                Ok(cached)
            }
            None => self.read(reach).await,
        }
    }

    /// Live resources of the kinds and namespaces `reach` covers (metadata only).
    pub(super) async fn read(&self, reach: &Reach) -> Result<Inventory, SyncError> {
        Ok(crate::inventory::metadata_list::read_in(
            &self.client,
            &reach.kinds,
            reach.namespaces.as_deref(),
        )
        .await?
        .inventory)
    }
}

/// The kinds and namespaces the head and base manifests govern: what the
/// round reads.
pub(super) struct Reach {
    pub(super) kinds: Vec<CamelKind>,
    /// `None`: every namespace.
    pub(super) namespaces: Option<Vec<String>>,
}

impl Reach {
    pub(super) fn covers_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|all| all.iter().any(|n| n == namespace))
    }

    pub(super) fn of(
        head: &OperatorAssignmentSpec,
        base: Option<&OperatorAssignmentSpec>,
    ) -> Reach {
        let specs: Vec<&OperatorAssignmentSpec> = std::iter::once(head).chain(base).collect();
        let kinds = CamelKind::ALL
            .into_iter()
            .filter(|k| specs.iter().any(|s| s.scope.covers_kind(*k)))
            .collect();
        let namespaces = specs
            .iter()
            .all(|s| !s.scope.namespaces.is_empty())
            .then(|| {
                let set: BTreeSet<String> = specs
                    .iter()
                    .flat_map(|s| s.scope.namespaces.iter().cloned())
                    .collect();
                set.into_iter().collect()
            });
        Reach { kinds, namespaces }
    }
}

/// Whether a round at revision `sha` has nothing to do on `inventory`: the
/// revision is applied and complete, and every resource is where it says
/// ([`rollout::settled`]).
fn idle(
    head: &OperatorAssignmentSpec,
    status: &OperatorAssignmentStatus,
    sha: &str,
    inventory: &Inventory,
) -> bool {
    let applied = status.last_applied_revision.as_deref() == Some(sha)
        && status
            .rollout
            .as_ref()
            .is_some_and(|r| r.state == RolloutState::Complete);
    applied && rollout::settled(head, inventory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RolloutStatus;
    use crate::inventory::Resource;

    fn head() -> OperatorAssignmentSpec {
        serde_saphyr::from_str(
            "operators: [{id: operator-1, namespace: x}, {id: operator-2, namespace: x}]\ndefaultOperator: operator-1\n",
        )
        .unwrap()
    }

    fn owned(owner: Option<&str>) -> Inventory {
        Inventory {
            keys_guarded: false,
            resources: vec![Resource::integration("a", "x", owner)],
        }
    }

    #[test]
    fn a_round_is_idle_only_when_applied_complete_and_settled() {
        let head = head();
        let complete = OperatorAssignmentStatus {
            last_applied_revision: Some("r1".into()),
            rollout: Some(RolloutStatus {
                revision: "r1".into(),
                state: RolloutState::Complete,
                ..Default::default()
            }),
            ..Default::default()
        };
        let synced = owned(Some("operator-1"));
        assert!(idle(&head, &complete, "r1", &synced));
        // Another revision, a rollout not complete, or work left: not idle.
        assert!(!idle(&head, &complete, "r2", &synced));
        let mut paused = complete.clone();
        paused.rollout.as_mut().unwrap().state = RolloutState::Paused;
        assert!(!idle(&head, &paused, "r1", &synced));
        assert!(!idle(&head, &complete, "r1", &owned(None)));
    }

    #[test]
    fn the_round_reads_what_head_and_base_govern() {
        let head = head();
        let everywhere = Reach::of(&head, None);
        assert!(everywhere.namespaces.is_none());
        assert!(everywhere.covers_namespace("any"));
        assert!(everywhere.kinds.contains(&CamelKind::Integration));
        let mut narrow = head.clone();
        narrow.scope.namespaces = vec!["b".into(), "a".into()];
        let mut base = head.clone();
        base.scope.namespaces = vec!["c".into(), "a".into()];
        let both = Reach::of(&narrow, Some(&base));
        assert_eq!(
            both.namespaces,
            Some(vec!["a".to_string(), "b".to_string(), "c".to_string()])
        );
        // A base that governs every namespace widens the read to all.
        assert!(Reach::of(&narrow, Some(&head)).namespaces.is_none());
    }
}
