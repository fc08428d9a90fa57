//! Undoing the manifest change one commit made (`kubectl camelk revert`).
//!
//! Expected flow:
//! 1. the caller reads the manifest at the commit (`after`) and at its first
//!    parent (`before`), and the current manifest;
//! 2. [`revert`] merges three ways, line by line, with `similar`'s
//!    [`TextMerge`]: the base is the commit's version, "ours" the current
//!    text, "theirs" the parent's. Regions only the commit changed go back to
//!    the parent's lines; every other line is the current text's, byte for
//!    byte;
//! 3. the result is parsed and validated as any edit's is, and checked
//!    against the sections of the spec the commit changed.
//!
//! Guarantees: only the lines the commit changed are touched; a region the
//! commit changed that was changed again later (or that a later change
//! touches: as in `git revert`, changes with no unchanged line between them
//! are one region) is a [`RevertError::Conflict`] naming the current lines,
//! and no text is returned. A result that would be invalid, or that changes a
//! part of the spec the commit did not change, is refused too.
//!
//! Assumptions: the current manifest is valid (a [`Manifest`]). The texts of
//! the commit and its parent are taken as they are; either may be invalid.
//!
//! Pure: no file system, no Git.

use std::ops::Range;

use similar::{MergeResolution, TextMerge};

use super::{Desired, Manifest, ManifestError};
use crate::api::{OperatorAssignment, OperatorAssignmentSpec};
use crate::inventory::{Resource, ResourceRef};

/// The manifest as one commit changed it.
#[derive(Clone, Debug)]
pub struct Revision {
    /// How messages name the commit (e.g. its short id).
    pub name: String,
    /// The manifest at the commit's first parent; `None` when it did not
    /// exist there (or the commit has no parent).
    pub before: Option<String>,
    /// The manifest at the commit; `None` when the commit deleted it.
    pub after: Option<String>,
}

/// One region where the commit's lines were changed again later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// Lines of the current manifest, from 1, end exclusive; empty when
    /// the later change deleted the commit's lines (then `start` is the
    /// line they were before).
    pub lines: Range<usize>,
    /// The lines the commit left there.
    pub committed: Vec<String>,
    /// The lines there now.
    pub now: Vec<String>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Range { start, end } = self.lines;
        match end - start {
            0 => write!(f, "before line {start} (deleted since)")?,
            1 => write!(f, "line {start}")?,
            _ => write!(f, "lines {start}-{}", end - 1)?,
        }
        writeln!(f, ":")?;
        let quote = |f: &mut std::fmt::Formatter<'_>, lines: &[String]| {
            if lines.is_empty() {
                return writeln!(f, "      (nothing)");
            }
            lines
                .iter()
                .try_for_each(|line| writeln!(f, "      | {}", line.trim_end_matches(['\n', '\r'])))
        };
        writeln!(f, "    the commit wrote:")?;
        quote(f, &self.committed)?;
        writeln!(f, "    now:")?;
        quote(f, &self.now)
    }
}

/// Why a revert was refused; nothing is written in any case.
#[derive(Debug, thiserror::Error)]
pub enum RevertError {
    /// The commit did not change the manifest.
    #[error("{rev} did not change {file}; nothing to revert")]
    Untouched {
        /// The commit.
        rev: String,
        /// The manifest's file.
        file: String,
    },
    /// The commit created the manifest: undoing it would delete the file.
    #[error(
        "{rev} created {file}; reverting it would delete the manifest (use `git revert` for that)"
    )]
    Created {
        /// The commit.
        rev: String,
        /// The manifest's file.
        file: String,
    },
    /// The commit deleted the manifest.
    #[error(
        "{rev} deleted {file}; restore it with `git revert` (or `git checkout {rev}^ -- {file}`)"
    )]
    Deleted {
        /// The commit.
        rev: String,
        /// The manifest's file.
        file: String,
    },
    /// Lines the commit changed were changed again since.
    #[error(
        "cannot revert {rev}: {file} was changed since in the lines {rev} changed (nothing was written)\n{}",
        .conflicts.iter().map(|c| format!("  {file}: {c}")).collect::<String>().trim_end()
    )]
    Conflict {
        /// The commit.
        rev: String,
        /// The manifest's file.
        file: String,
        /// Each conflicting region, in file order.
        conflicts: Vec<Conflict>,
    },
    /// The reverted manifest would not validate.
    #[error(
        "the manifest after reverting {rev} would be invalid (positions are in the reverted text; nothing was written):\n{source}"
    )]
    Invalid {
        /// The commit.
        rev: String,
        /// The validation errors.
        #[source]
        source: ManifestError,
    },
    /// The merge changed a part of the spec the commit did not change.
    #[error(
        "internal error: reverting {rev} would change {sections} of {file}, which {rev} did not change; nothing was written"
    )]
    Guard {
        /// The commit.
        rev: String,
        /// The manifest's file.
        file: String,
        /// The sections, comma-separated.
        sections: String,
    },
}

/// The current manifest with one commit's change undone.
#[derive(Clone, Debug)]
pub struct Reverted {
    /// The whole manifest text after the revert.
    pub text: String,
    /// The reverted manifest, validated.
    pub manifest: Manifest,
    /// One line per change, for the commit message (empty only when the
    /// text is the current one: the commit's change is undone already).
    pub changes: Vec<String>,
    /// Resources whose pin the revert changes, for a plan without inventory.
    pub resources: Vec<ResourceRef>,
}

/// Undoes `rev`'s change of the manifest in `current` (see the module
/// documentation).
pub fn revert(current: &Manifest, rev: &Revision) -> Result<Reverted, RevertError> {
    let (file, name) = (current.file.clone(), rev.name.clone());
    let (before, after) = match (&rev.before, &rev.after) {
        (Some(before), Some(after)) if before != after => (before, after),
        (None, None) | (Some(_), Some(_)) => {
            return Err(RevertError::Untouched { rev: name, file });
        }
        (None, Some(_)) => return Err(RevertError::Created { rev: name, file }),
        (Some(_), None) => return Err(RevertError::Deleted { rev: name, file }),
    };
    let text = undo(before, after, &current.text).map_err(|conflicts| RevertError::Conflict {
        rev: name.clone(),
        file: file.clone(),
        conflicts,
    })?;
    let manifest =
        Manifest::parse(&current.file, text.clone()).map_err(|source| RevertError::Invalid {
            rev: name.clone(),
            source,
        })?;
    let leaked = leaked_sections(before, after, current, &manifest);
    if !leaked.is_empty() {
        return Err(RevertError::Guard {
            rev: name,
            file,
            sections: leaked.join(", "),
        });
    }
    let (mut changes, resources) =
        describe(&current.assignment.spec, &manifest.assignment.spec, &name);
    if changes.is_empty() && text != current.text {
        changes.push(format!(
            "comments and formatting as before {name} (the spec is unchanged)"
        ));
    }
    Ok(Reverted {
        text,
        manifest,
        changes,
        resources,
    })
}

/// `current` with the change from `before` to `after` undone: a three-way
/// line merge whose base is `after`. The conflicting regions, with lines of
/// `current`, when the change cannot be undone alone.
pub(crate) fn undo(before: &str, after: &str, current: &str) -> Result<String, Vec<Conflict>> {
    let merge = TextMerge::from_lines(after, current, before);
    let conflicts: Vec<Conflict> = merge
        .regions()
        .iter()
        .filter(|region| region.resolution() == MergeResolution::Conflict)
        .map(|region| {
            let now = region.ours_range();
            Conflict {
                lines: now.start + 1..now.end + 1,
                committed: region
                    .base_range()
                    .filter_map(|i| merge.base_line(i).map(str::to_string))
                    .collect(),
                now: now
                    .filter_map(|i| merge.ours_line(i).map(str::to_string))
                    .collect(),
            }
        })
        .collect();
    if conflicts.is_empty() {
        Ok(merge.to_string())
    } else {
        Err(conflicts)
    }
}

/// Top-level parts of the assignment (`metadata` and each `spec` field)
/// that `rev` did not change but the revert would: the guard against a merge
/// that reaches past the commit's lines. A text of `rev` that does not parse
/// leaves nothing to compare, so nothing is reported.
fn leaked_sections(
    before: &str,
    after: &str,
    current: &Manifest,
    reverted: &Manifest,
) -> Vec<String> {
    let parse = |text: &str| {
        serde_saphyr::from_str::<OperatorAssignment>(text)
            .ok()
            .and_then(|a| serde_json::to_value(&a).ok())
    };
    let value = |m: &Manifest| serde_json::to_value(&m.assignment).ok();
    let (Some(before), Some(after), Some(current), Some(reverted)) =
        (parse(before), parse(after), value(current), value(reverted))
    else {
        return Vec::new();
    };
    sections_changed_outside(&before, &after, &current, &reverted)
}

/// The sections (`metadata`, `spec.<field>`) where `current` and `reverted`
/// differ although `before` and `after` agree.
fn sections_changed_outside(
    before: &serde_json::Value,
    after: &serde_json::Value,
    current: &serde_json::Value,
    reverted: &serde_json::Value,
) -> Vec<String> {
    let mut sections: Vec<(String, &str, Option<&str>)> =
        vec![("metadata".into(), "metadata", None)];
    let mut keys: Vec<&str> = [before, after, current, reverted]
        .iter()
        .filter_map(|v| v.get("spec").and_then(|s| s.as_object()))
        .flat_map(|spec| spec.keys().map(String::as_str))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    sections.extend(
        keys.into_iter()
            .map(|k| (format!("spec.{k}"), "spec", Some(k))),
    );
    sections
        .into_iter()
        .filter(|(_, top, key)| {
            let at = |v: &serde_json::Value| {
                let part = v.get(*top);
                match key {
                    Some(key) => part.and_then(|p| p.get(*key)).cloned(),
                    None => part.cloned(),
                }
            };
            at(before) == at(after) && at(current) != at(reverted)
        })
        .map(|(name, _, _)| name)
        .collect()
}

/// What the revert does, in words: each resource whose pin changes, with its
/// desired owner before and after; then each other part of the spec that
/// changes.
fn describe(
    current: &OperatorAssignmentSpec,
    reverted: &OperatorAssignmentSpec,
    rev: &str,
) -> (Vec<String>, Vec<ResourceRef>) {
    let pinned = |spec: &OperatorAssignmentSpec| -> Vec<(ResourceRef, String)> {
        spec.pins
            .iter()
            .map(|p| {
                (
                    ResourceRef {
                        kind: p.kind,
                        namespace: p.namespace.clone(),
                        name: p.name.clone(),
                    },
                    p.operator.to_string(),
                )
            })
            .collect()
    };
    let (old, new) = (pinned(current), pinned(reverted));
    let mut resources: Vec<ResourceRef> = old
        .iter()
        .filter(|pin| !new.contains(pin))
        .chain(new.iter().filter(|pin| !old.contains(pin)))
        .map(|(id, _)| id.clone())
        .collect();
    resources.sort();
    resources.dedup();
    let owner = |spec: &OperatorAssignmentSpec, id: &ResourceRef| {
        Desired::new(spec)
            .decide(&Resource {
                id: id.clone(),
                labels: Default::default(),
                owner_annotation: None,
                phase: None,
                in_flight: None,
                created_by: None,
                key_managers: Default::default(),
            })
            .map(|d| format!("{} (by {})", d.operator, d.because))
            .unwrap_or_else(|| "out of scope".into())
    };
    let mut changes: Vec<String> = resources
        .iter()
        .map(|id| format!("{id}: {} -> {}", owner(current, id), owner(reverted, id)))
        .collect();
    let (Ok(serde_json::Value::Object(old)), Ok(serde_json::Value::Object(new))) = (
        serde_json::to_value(current),
        serde_json::to_value(reverted),
    ) else {
        return (changes, resources);
    };
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    changes.extend(
        keys.into_iter()
            .filter(|k| *k != "pins" && old.get(*k) != new.get(*k))
            .map(|k| format!("spec.{k}: as before {rev}")),
    );
    (changes, resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "\
# The shop's operators.
apiVersion: camelk.dev/v1alpha1
kind: OperatorAssignment
metadata:
  name: shop
spec:
  operators:
    - id: operator-1   # current
      namespace: camel-k
    - id: operator-2   # next
      namespace: camel-k
  defaultOperator: operator-1
  rules:
    - name: canary
      match:
        names: [\"canary-*\"]
      operator: operator-2
  pins:
    - kind: Integration
      namespace: shop
      name: orders
      operator: operator-1   # keep during the sale
    - kind: Pipe
      namespace: shop
      name: events
      operator: 'operator-1'

  rollout:
    steps: [\"50%\"]
";

    fn manifest(text: &str) -> Manifest {
        Manifest::parse("operator-assignment.yaml", text.to_string()).unwrap()
    }

    fn rev(before: &str, after: &str) -> Revision {
        Revision {
            name: "abc1234".into(),
            before: Some(before.into()),
            after: Some(after.into()),
        }
    }

    /// `text` with `from` replaced by `to`, which must occur exactly once.
    fn edit(text: &str, from: &str, to: &str) -> String {
        assert_eq!(text.matches(from).count(), 1, "{from:?}");
        text.replacen(from, to, 1)
    }

    const ORDERS_TO_2: (&str, &str) = (
        "operator: operator-1   # keep during the sale",
        "operator: operator-2   # keep during the sale",
    );

    #[test]
    fn a_clean_revert_gives_back_the_parent_text() {
        let after = edit(BASE, ORDERS_TO_2.0, ORDERS_TO_2.1);
        let reverted = revert(&manifest(&after), &rev(BASE, &after)).unwrap();
        assert_eq!(reverted.text, BASE);
        assert_eq!(
            reverted.changes,
            ["Integration shop/orders: operator-2 (by pin #1) -> operator-1 (by pin #1)"]
        );
        assert_eq!(reverted.resources.len(), 1);
    }

    #[test]
    fn a_later_unrelated_edit_stays_byte_for_byte() {
        let after = edit(BASE, ORDERS_TO_2.0, ORDERS_TO_2.1);
        // Later: a comment, a reordered and requoted operator entry, a new
        // rule name, a staged move; none next to the commit's line.
        let later = edit(
            &edit(
                &edit(
                    &after,
                    "    - id: operator-1   # current\n      namespace: camel-k\n",
                    "    - namespace: \"camel-k\"  # moved up\n      id: operator-1\n",
                ),
                "- name: canary\n",
                "- name: 'canary-rule'   # renamed\n",
            ),
            "  rollout:\n",
            "  stagedMoves:\n    - {from: operator-1, to: operator-2}\n  rollout:\n",
        );
        let current = manifest(&later);
        let reverted = revert(&current, &rev(BASE, &after)).unwrap();
        assert_eq!(reverted.text, edit(&later, ORDERS_TO_2.1, ORDERS_TO_2.0));
        // Only the commit's line differs from the current text.
        let changed: Vec<_> = later
            .lines()
            .zip(reverted.text.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(later.lines().count(), reverted.text.lines().count());
    }

    #[test]
    fn a_conflict_names_the_current_lines_and_both_texts() {
        let after = edit(BASE, ORDERS_TO_2.0, ORDERS_TO_2.1);
        let later = edit(
            &after,
            ORDERS_TO_2.1,
            "operator: operator-1   # the sale is over",
        );
        let error = revert(&manifest(&later), &rev(BASE, &after)).unwrap_err();
        let RevertError::Conflict { conflicts, .. } = &error else {
            panic!("{error}")
        };
        assert_eq!(
            conflicts,
            &[Conflict {
                lines: 22..23,
                committed: vec![format!("      {}\n", ORDERS_TO_2.1)],
                now: vec!["      operator: operator-1   # the sale is over\n".into()],
            }]
        );
        let message = error.to_string();
        assert!(
            message.contains("operator-assignment.yaml: line 22:\n    the commit wrote:\n      |       operator: operator-2   # keep during the sale\n    now:\n      |       operator: operator-1   # the sale is over"),
            "{message}"
        );
        assert!(message.contains("nothing was written"), "{message}");
    }

    #[test]
    fn a_later_change_touching_the_commits_lines_is_a_conflict_too() {
        // As `git revert`: no unchanged line between the two changes makes
        // them one region, which cannot be undone alone.
        let after = edit(
            BASE,
            "      operator: 'operator-1'\n",
            "      operator: 'operator-2'\n",
        );
        let later = edit(
            &after,
            "      operator: 'operator-2'\n\n",
            "      operator: 'operator-2'\n    - kind: Kamelet\n      namespace: shop\n      name: timer\n      operator: operator-1\n\n",
        );
        let error = revert(&manifest(&later), &rev(BASE, &after)).unwrap_err();
        let RevertError::Conflict { conflicts, .. } = &error else {
            panic!("{error}")
        };
        assert_eq!(conflicts[0].lines, 26..31, "{error}");
    }

    #[test]
    fn a_commit_that_added_an_operator_is_undone_whole() {
        let after = edit(
            BASE,
            "  defaultOperator",
            "    - id: operator-3\n      namespace: camel-k-3\n  defaultOperator",
        );
        let later = edit(&after, "[\"50%\"]", "[\"25%\", \"100%\"]");
        let reverted = revert(&manifest(&later), &rev(BASE, &after)).unwrap();
        assert_eq!(
            reverted.text,
            edit(BASE, "[\"50%\"]", "[\"25%\", \"100%\"]")
        );
        assert_eq!(reverted.changes, ["spec.operators: as before abc1234"]);
        assert!(reverted.resources.is_empty());
    }

    #[test]
    fn a_commit_that_removed_a_pin_puts_it_back() {
        let pin = "    - kind: Integration\n      namespace: shop\n      name: orders\n      operator: operator-1   # keep during the sale\n";
        let after = edit(BASE, pin, "");
        let later = edit(
            &after,
            "defaultOperator: operator-1",
            "defaultOperator: operator-2",
        );
        let reverted = revert(&manifest(&later), &rev(BASE, &after)).unwrap();
        assert_eq!(
            reverted.text,
            edit(
                BASE,
                "defaultOperator: operator-1",
                "defaultOperator: operator-2"
            )
        );
        assert_eq!(
            reverted.changes,
            ["Integration shop/orders: operator-2 (by default) -> operator-1 (by pin #1)"]
        );
    }

    #[test]
    fn a_commit_that_changed_a_rollout_step_gets_its_old_steps() {
        let with_move = edit(
            BASE,
            "  rollout:\n",
            "  stagedMoves:\n    - from: operator-1\n      to: operator-2\n      steps: [\"10%\", \"100%\"]\n  rollout:\n",
        );
        let after = edit(
            &with_move,
            "[\"10%\", \"100%\"]",
            "[\"10%\", \"50%\", \"100%\"]",
        );
        let later = edit(&after, ORDERS_TO_2.0, ORDERS_TO_2.1);
        let reverted = revert(&manifest(&later), &rev(&with_move, &after)).unwrap();
        assert_eq!(
            reverted.text,
            edit(&with_move, ORDERS_TO_2.0, ORDERS_TO_2.1)
        );
        assert_eq!(reverted.changes, ["spec.stagedMoves: as before abc1234"]);
    }

    #[test]
    fn a_comment_only_commit_is_undone_and_said_so() {
        let after = edit(BASE, "# current", "# current, until June");
        let reverted = revert(&manifest(&after), &rev(BASE, &after)).unwrap();
        assert_eq!(reverted.text, BASE);
        assert_eq!(
            reverted.changes,
            ["comments and formatting as before abc1234 (the spec is unchanged)"]
        );
        // Undone already: the same text, nothing to say.
        let again = revert(&manifest(BASE), &rev(BASE, &after)).unwrap();
        assert_eq!(again.text, BASE);
        assert!(again.changes.is_empty());
    }

    #[test]
    fn a_commit_that_did_not_change_the_manifest_is_refused() {
        let current = manifest(BASE);
        let untouched = revert(&current, &rev(BASE, BASE)).unwrap_err();
        assert!(
            untouched
                .to_string()
                .contains("abc1234 did not change operator-assignment.yaml; nothing to revert"),
            "{untouched}"
        );
        let created = Revision {
            before: None,
            ..rev(BASE, BASE)
        };
        assert!(matches!(
            revert(&current, &created),
            Err(RevertError::Created { .. })
        ));
        let deleted = Revision {
            after: None,
            ..rev(BASE, BASE)
        };
        assert!(matches!(
            revert(&current, &deleted),
            Err(RevertError::Deleted { .. })
        ));
    }

    #[test]
    fn an_invalid_result_is_refused() {
        // The parent named an operator that a later commit removed from the
        // declared operators: putting its pin back would not validate.
        let after = edit(BASE, ORDERS_TO_2.0, ORDERS_TO_2.1);
        let later = edit(
            &edit(
                &after,
                "    - id: operator-1   # current\n      namespace: camel-k\n",
                "",
            ),
            "defaultOperator: operator-1",
            "defaultOperator: operator-2",
        );
        let later = edit(&later, "operator: 'operator-1'", "operator: 'operator-2'");
        let error = revert(&manifest(&later), &rev(BASE, &after)).unwrap_err();
        assert!(matches!(error, RevertError::Invalid { .. }), "{error}");
        assert!(error.to_string().contains("operator-1"), "{error}");
    }

    #[test]
    fn the_guard_names_sections_the_commit_did_not_change() {
        let json = |default: &str, steps: &str| {
            serde_json::json!({
                "metadata": {"name": "shop"},
                "spec": {"defaultOperator": default, "rollout": {"steps": [steps]}}
            })
        };
        let (before, after) = (json("a", "50%"), json("b", "50%"));
        assert_eq!(
            sections_changed_outside(&before, &after, &json("b", "50%"), &json("a", "50%")),
            Vec::<String>::new()
        );
        assert_eq!(
            sections_changed_outside(&before, &after, &json("b", "50%"), &json("a", "25%")),
            ["spec.rollout"]
        );
    }
}
