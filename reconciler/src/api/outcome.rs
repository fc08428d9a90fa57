//! Typed states of the status `reconciler sync` writes: where a rollout
//! stands ([`RolloutState`]) and how a revision's migration ended
//! ([`MigrationResult`]).
//!
//! Contract: each serializes to exactly the word the status always held
//! (`"Paused"`, `"Succeeded"`, ...), and the CRD keeps describing the fields
//! as plain strings, so objects written before these types existed stay
//! valid and read the same. A word this version does not know reads as the
//! type's default instead of failing the whole status. Comparing with a
//! `&str` and [`Display`](std::fmt::Display) (padding honoured) keep readers
//! that treat the fields as text working.

use serde::{Deserialize, Serialize};

macro_rules! status_word {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                Ok($name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == word)
                    .unwrap_or_default())
            }
        }

        impl $name {
            /// Every state, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word the status holds.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

status_word! {
    /// Where the rollout of one revision stands (`status.rollout.state`).
    RolloutState {
        /// Recorded before its first step started (written only when a
        /// round records no step at all); also what an unknown word reads as.
        #[default]
        New = "",
        /// A step's handoffs are running.
        Progressing = "Progressing",
        /// Moved resources are checked by the health gate.
        WaitingForHealth = "WaitingForHealth",
        /// The manifest's `rollout.pause` before the next step.
        Pausing = "Pausing",
        /// The next step waits for `kubectl camelk approve`
        /// (`rollout.approval`).
        WaitingForApproval = "WaitingForApproval",
        /// The next step waits for a freeze window (`rollout.windows`) to
        /// let it start.
        WaitingForWindow = "WaitingForWindow",
        /// A gate or a handoff holds the rollout; a later round retries the
        /// same step.
        Paused = "Paused",
        /// The step was handed back after a failed gate; the rollout waits
        /// for a new revision.
        RolledBack = "RolledBack",
        /// Every step done and healthy: the revision is applied.
        Complete = "Complete",
    }
}

status_word! {
    /// How a revision's migration stands in `status.history`.
    MigrationResult {
        /// Started and not stopped; also what an unknown word reads as.
        #[default]
        Progressing = "Progressing",
        /// A gate or a handoff holds it; it goes on from there.
        Paused = "Paused",
        /// Its step was handed back; it has ended.
        RolledBack = "RolledBack",
        /// Every step done and healthy.
        Succeeded = "Succeeded",
        /// A newer revision replaced it before it ended.
        Superseded = "Superseded",
    }
}

impl From<RolloutState> for MigrationResult {
    /// The history's word for a rollout that stopped in `state`.
    fn from(state: RolloutState) -> MigrationResult {
        match state {
            RolloutState::Paused => MigrationResult::Paused,
            RolloutState::RolledBack => MigrationResult::RolledBack,
            RolloutState::Complete => MigrationResult::Succeeded,
            RolloutState::New
            | RolloutState::Progressing
            | RolloutState::WaitingForHealth
            | RolloutState::Pausing
            | RolloutState::WaitingForApproval
            | RolloutState::WaitingForWindow => MigrationResult::Progressing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_serializes_to_its_word_and_back() {
        for state in RolloutState::ALL {
            let json = serde_json::to_string(state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
            assert_eq!(serde_json::from_str::<RolloutState>(&json).unwrap(), *state);
        }
        for result in MigrationResult::ALL {
            let json = serde_json::to_string(result).unwrap();
            assert_eq!(json, format!("\"{}\"", result.as_str()));
            assert_eq!(
                serde_json::from_str::<MigrationResult>(&json).unwrap(),
                *result
            );
        }
    }

    #[test]
    fn unknown_words_read_as_the_default_and_text_comparisons_hold() {
        let state: RolloutState = serde_json::from_str("\"Exploded\"").unwrap();
        assert_eq!(state, RolloutState::New);
        let result: MigrationResult = serde_json::from_str("\"Exploded\"").unwrap();
        assert_eq!(result, MigrationResult::Progressing);
        assert!(RolloutState::Paused == "Paused");
        assert!(MigrationResult::Succeeded != "Paused");
        assert_eq!(format!("[{:<8}]", RolloutState::Paused), "[Paused  ]");
        assert_eq!(
            MigrationResult::from(RolloutState::RolledBack),
            MigrationResult::RolledBack
        );
        assert_eq!(
            MigrationResult::from(RolloutState::Pausing),
            MigrationResult::Progressing
        );
    }

    #[test]
    fn the_crd_keeps_both_fields_plain_strings() {
        let crd = serde_json::to_value(crate::api::crd()).unwrap();
        let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"];
        let state = &status["rollout"]["properties"]["state"];
        let result = &status["history"]["items"]["properties"]["result"];
        for field in [state, result] {
            assert_eq!(field["type"], "string", "{field}");
            assert!(field.get("enum").is_none(), "{field}");
        }
    }
}
