//! Format-preserving edits of the manifest: pins (`assign`, `unassign`) and
//! staged moves (`rollout`). This module is the one interface to YAML
//! editing: nothing else in the crate writes manifest text through
//! `yaml-edit` or the pin splice.
//!
//! Contract:
//! - An edit takes a valid [`Manifest`] and returns the new text. It changes
//!   only the nodes the change needs, through the lossless `yaml-edit` tree:
//!   comments, key order, quoting and indentation of every other part stay
//!   byte-identical, so the Git diff holds only the lines that must change.
//!   A changed scalar keeps its quote style.
//! - The result is parsed and validated again, and its typed value must equal
//!   the old one with the change applied (the guard against an editor
//!   surprise); otherwise the edit fails and nothing is returned.
//! - Edits are pure: they never touch the file system.
//! - Pin edits (`assign`, `unassign`) first try the private `splice`
//!   engine, which writes the same bytes without a lossless parse and print
//!   of the whole file or a second full parse, and checks the changed part
//!   against the expected pins; the `yaml-edit` path above is the general one
//!   for every other shape. [`EditPath`] says which one wrote an edit, and
//!   [`assign_general`] / [`unassign_general`] take the general path only
//!   (the reference the tests and the `yaml_engines` bench compare against).
//!
//! Why two engines behind this one interface: on a manifest with 10,000 pins
//! the edit through `yaml-edit` alone takes over twice the 100 ms the whole
//! `assign` may take, the splice a quarter of it or less (`docs/performance.md`,
//! P7).

use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use yaml_edit::{Document, Mapping, MappingBuilder, ScalarValue, Sequence, SequenceBuilder};

use super::diagnostic::hint;
use super::{Manifest, ManifestError};
use crate::api::{OperatorAssignmentSpec, OperatorId, Pin, StagedMove, Step};
use crate::inventory::ResourceRef;

mod splice;

use splice::PinEdit;

/// Why an edit was refused.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The edit names an operator the manifest does not declare.
    #[error("unknown operator `{id}`{hint}; declared operators: {declared}")]
    UnknownOperator {
        /// The id given.
        id: String,
        /// A suggestion of a declared id close to it, or empty.
        hint: String,
        /// The declared operator ids, comma-separated.
        declared: String,
    },
    /// An unassign of a resource that has no pin (the resource, the file).
    #[error("{0} is not pinned in {1}; nothing to unassign")]
    NotPinned(ResourceRef, String),
    /// The manifest's shape is not one the editor can change safely.
    #[error("cannot edit {file}: {message}")]
    Structure {
        /// The manifest's file.
        file: String,
        /// What shape it found.
        message: String,
    },
    /// The edited manifest would not validate; nothing is written.
    #[error(
        "the manifest after this edit would be invalid (positions are in the edited text; nothing was written):\n{0}"
    )]
    Invalid(#[source] ManifestError),
    /// The edit changed lines it should not have; nothing is written.
    #[error("internal error: the edit of {file} changed more than intended; nothing was written")]
    Guard {
        /// The manifest's file.
        file: String,
    },
}

/// What one edit did, in words for the commit message.
#[derive(Clone, Debug)]
pub struct Edited {
    /// The whole manifest text after the edit.
    pub text: String,
    /// The edited manifest, already validated (no need to parse it again).
    pub manifest: Manifest,
    /// One line per change, e.g. `Integration shop/orders: operator-1 -> operator-2`.
    pub changes: Vec<String>,
    /// How the text was written.
    pub path: EditPath,
}

/// The mechanism that wrote an edit (the bytes are the same either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditPath {
    /// Nothing to change: the text is the manifest's.
    Unchanged,
    /// Spliced into the pin list at known byte ranges (the private `splice`).
    Splice,
    /// Through the lossless `yaml-edit` tree, then parsed again in full.
    General,
}

/// Pins each of `resources` to `to` (changing an existing pin's operator).
pub fn assign(
    manifest: &Manifest,
    resources: &[ResourceRef],
    to: &OperatorId,
) -> Result<Edited, EditError> {
    assign_by(manifest, resources, to, true)
}

/// [`assign`] through the general path only (the reference the splice path
/// is tested against).
pub fn assign_general(
    manifest: &Manifest,
    resources: &[ResourceRef],
    to: &OperatorId,
) -> Result<Edited, EditError> {
    assign_by(manifest, resources, to, false)
}

fn assign_by(
    manifest: &Manifest,
    resources: &[ResourceRef],
    to: &OperatorId,
    splice: bool,
) -> Result<Edited, EditError> {
    require_operator(&manifest.assignment.spec, to)?;
    let mut expected = manifest.assignment.spec.clone();
    let mut changes = Vec::new();
    let mut edits = Vec::new();
    for resource in resources {
        let current = super::Desired::new(&expected).decide(&crate::inventory::Resource {
            id: resource.clone(),
            labels: Default::default(),
            owner_annotation: None,
            phase: None,
            in_flight: None,
            created_by: None,
            key_managers: Default::default(),
        });
        let before = current
            .map(|d| d.operator.to_string())
            .unwrap_or_else(|| "out of scope".into());
        match expected.pins.iter().position(|p| same(p, resource)) {
            Some(index) => {
                if expected.pins[index].operator == *to {
                    continue;
                }
                expected.pins[index].operator = to.clone();
                edits.push(PinEdit::Set {
                    index,
                    to: to.clone(),
                });
            }
            None => {
                let pin = Pin {
                    kind: resource.kind,
                    namespace: resource.namespace.clone(),
                    name: resource.name.clone(),
                    operator: to.clone(),
                };
                expected.pins.push(pin.clone());
                edits.push(PinEdit::Append(pin));
            }
        }
        changes.push(format!("{resource}: {before} -> {to}"));
    }
    apply(manifest, &edits, &expected, changes, splice)
}

/// Removes the pins of `resources`.
pub fn unassign(manifest: &Manifest, resources: &[ResourceRef]) -> Result<Edited, EditError> {
    unassign_by(manifest, resources, true)
}

/// [`unassign`] through the general path only.
pub fn unassign_general(
    manifest: &Manifest,
    resources: &[ResourceRef],
) -> Result<Edited, EditError> {
    unassign_by(manifest, resources, false)
}

fn unassign_by(
    manifest: &Manifest,
    resources: &[ResourceRef],
    splice: bool,
) -> Result<Edited, EditError> {
    let mut expected = manifest.assignment.spec.clone();
    // Where each remaining pin was before the edit.
    let mut origin: Vec<usize> = (0..expected.pins.len()).collect();
    let mut changes = Vec::new();
    let mut edits = Vec::new();
    for resource in resources {
        let index = expected
            .pins
            .iter()
            .position(|p| same(p, resource))
            .ok_or_else(|| EditError::NotPinned(resource.clone(), manifest.file.clone()))?;
        let pinned_to = expected.pins.remove(index).operator;
        edits.push(PinEdit::Remove {
            index: origin.remove(index),
        });
        let after = super::Desired::new(&expected)
            .decide(&crate::inventory::Resource {
                id: resource.clone(),
                labels: Default::default(),
                owner_annotation: None,
                phase: None,
                in_flight: None,
                created_by: None,
                key_managers: Default::default(),
            })
            .map(|d| format!("{} (by {})", d.operator, d.because))
            .unwrap_or_else(|| "out of scope".into());
        changes.push(format!(
            "{resource}: unpinned from {pinned_to}, now {after}"
        ));
    }
    apply(manifest, &edits, &expected, changes, splice)
}

/// Makes pin edits: through the splice when it can, else through the
/// lossless tree of `yaml-edit`.
fn apply(
    manifest: &Manifest,
    edits: &[PinEdit],
    expected: &OperatorAssignmentSpec,
    changes: Vec<String>,
    splice: bool,
) -> Result<Edited, EditError> {
    if changes.is_empty() {
        return Ok(Edited {
            text: manifest.text.clone(),
            manifest: manifest.clone(),
            changes,
            path: EditPath::Unchanged,
        });
    }
    if splice && let Some(edited) = splice::pins(manifest, edits, expected) {
        return Ok(Edited {
            text: edited.text.clone(),
            manifest: edited,
            changes,
            path: EditPath::Splice,
        });
    }
    let doc = open(manifest)?;
    let spec = spec_mapping(manifest, &doc)?;
    // Indices of the pins before the edit, as removals go.
    let mut origin: Vec<usize> = (0..manifest.assignment.spec.pins.len()).collect();
    for edit in edits {
        match edit {
            PinEdit::Set { index, to } => {
                let pins = sequence(manifest, &spec, "pins")?;
                let item = pins
                    .get(*index)
                    .and_then(|n| n.as_mapping().cloned())
                    .ok_or_else(|| structure(manifest, "a pin is not a mapping"))?;
                set_scalar(&item, "operator", to.as_str());
            }
            PinEdit::Append(pin) => {
                let built = MappingBuilder::new()
                    .pair("kind", pin.kind.kind())
                    .pair("namespace", pin.namespace.as_str())
                    .pair("name", pin.name.as_str())
                    .pair("operator", pin.operator.as_str())
                    .build_document();
                let item = built
                    .as_mapping()
                    .ok_or_else(|| structure(manifest, "building a pin"))?;
                append(manifest, &spec, "pins", &item)?;
            }
            PinEdit::Remove { index } => {
                let current = origin
                    .iter()
                    .position(|i| i == index)
                    .ok_or_else(|| structure(manifest, "a pin is removed twice"))?;
                origin.remove(current);
                let pins = sequence(manifest, &spec, "pins")?;
                pins.remove(current);
            }
        }
    }
    finish(manifest, &doc, expected, changes)
}

/// Adds (or, for the same `from`, `to` and selector, updates) a staged move.
pub fn rollout(
    manifest: &Manifest,
    from: &OperatorId,
    to: &OperatorId,
    steps: &[Step],
    selector: Option<(&str, &LabelSelector)>,
) -> Result<Edited, EditError> {
    require_operator(&manifest.assignment.spec, from)?;
    require_operator(&manifest.assignment.spec, to)?;
    let doc = open(manifest)?;
    let spec = spec_mapping(manifest, &doc)?;
    let mut expected = manifest.assignment.spec.clone();
    let staged = StagedMove {
        from: from.clone(),
        to: to.clone(),
        selector: selector.map(|(_, s)| s.clone()),
        steps: steps.to_vec(),
    };
    let steps_text = steps
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let describe = format!(
        "staged move {from} -> {to}{}{}",
        selector
            .map(|(text, _)| format!(" of resources matching `{text}`"))
            .unwrap_or_default(),
        if steps.is_empty() {
            String::new()
        } else {
            format!(" in steps {steps_text}")
        }
    );
    let existing = expected
        .staged_moves
        .iter()
        .position(|m| m.from == staged.from && m.to == staged.to && m.selector == staged.selector);
    match existing {
        Some(index) => {
            if expected.staged_moves[index] == staged {
                return Ok(Edited {
                    text: manifest.text.clone(),
                    manifest: manifest.clone(),
                    changes: Vec::new(),
                    path: EditPath::Unchanged,
                });
            }
            let moves = sequence(manifest, &spec, "stagedMoves")?;
            let item = moves
                .get(index)
                .and_then(|n| n.as_mapping().cloned())
                .ok_or_else(|| structure(manifest, "a staged move is not a mapping"))?;
            if steps.is_empty() {
                item.remove("steps");
            } else {
                item.set("steps", steps_sequence(steps));
            }
            expected.staged_moves[index] = staged;
        }
        None => {
            let mut builder = MappingBuilder::new()
                .pair("from", from.as_str())
                .pair("to", to.as_str());
            if let Some((_, selector)) = selector {
                builder = builder.insert_mapping("selector", selector_builder(selector));
            }
            let item = builder.build_document();
            let item = item
                .as_mapping()
                .ok_or_else(|| structure(manifest, "building a staged move"))?;
            if !steps.is_empty() {
                item.set("steps", steps_sequence(steps));
            }
            append(manifest, &spec, "stagedMoves", &item)?;
            expected.staged_moves.push(staged);
        }
    }
    finish(manifest, &doc, &expected, vec![describe])
}

/// Steps as a flow list (`["10%", 5]`), the way people write them.
fn steps_sequence(steps: &[Step]) -> Sequence {
    let list = Sequence::new_flow();
    for step in steps {
        match step {
            Step::Count(n) => list.push(*n as i64),
            Step::Percent(_) => list.push(ScalarValue::double_quoted(step.to_string())),
        }
    }
    list
}

fn selector_builder(selector: &LabelSelector) -> MappingBuilder {
    let mut builder = MappingBuilder::new();
    if let Some(labels) = selector.match_labels.as_ref().filter(|l| !l.is_empty()) {
        let mut inner = MappingBuilder::new();
        for (key, value) in labels {
            inner = inner.pair(key.as_str(), ScalarValue::double_quoted(value.as_str()));
        }
        builder = builder.insert_mapping("matchLabels", inner);
    }
    if let Some(expressions) = selector
        .match_expressions
        .as_ref()
        .filter(|e| !e.is_empty())
    {
        let list = Sequence::new_flow();
        for e in expressions {
            let item = Mapping::new_flow();
            item.set("key", e.key.as_str());
            item.set("operator", e.operator.as_str());
            if let Some(values) = e.values.as_ref().filter(|v| !v.is_empty()) {
                let seq = Sequence::new_flow();
                for v in values {
                    seq.push(ScalarValue::double_quoted(v.as_str()));
                }
                item.set("values", &seq);
            }
            list.push(&item);
        }
        builder = builder.pair("matchExpressions", &list);
    }
    builder
}

fn same(pin: &Pin, resource: &ResourceRef) -> bool {
    pin.kind == resource.kind && pin.namespace == resource.namespace && pin.name == resource.name
}

fn require_operator(spec: &OperatorAssignmentSpec, id: &OperatorId) -> Result<(), EditError> {
    let ids: Vec<&str> = spec.operators.iter().map(|o| o.id.as_str()).collect();
    if ids.contains(&id.as_str()) {
        return Ok(());
    }
    Err(EditError::UnknownOperator {
        id: id.to_string(),
        hint: hint(id.as_str(), ids.iter().copied()),
        declared: ids.join(", "),
    })
}

fn structure(manifest: &Manifest, message: &str) -> EditError {
    EditError::Structure {
        file: manifest.file.clone(),
        message: message.to_string(),
    }
}

fn open(manifest: &Manifest) -> Result<Document, EditError> {
    Document::from_str(&manifest.text).map_err(|e| structure(manifest, &e.to_string()))
}

fn spec_mapping(manifest: &Manifest, doc: &Document) -> Result<Mapping, EditError> {
    doc.as_mapping()
        .and_then(|root| root.get_mapping("spec"))
        .ok_or_else(|| structure(manifest, "`spec` is not a mapping"))
}

fn sequence(manifest: &Manifest, parent: &Mapping, key: &str) -> Result<Sequence, EditError> {
    parent
        .get_sequence(key)
        .ok_or_else(|| structure(manifest, &format!("`spec.{key}` is not a list")))
}

/// Appends `item` to the list at `key`, creating the list when it is absent
/// or written as an empty flow list (`[]`).
fn append(
    manifest: &Manifest,
    parent: &Mapping,
    key: &str,
    item: &Mapping,
) -> Result<(), EditError> {
    match parent.get_sequence(key) {
        Some(list) if !(list.is_empty() && list.is_flow_style()) => {
            list.push(item);
            Ok(())
        }
        Some(_) | None
            if parent.get(key).is_none_or(|v| {
                v.as_sequence().is_some() || v.as_scalar().is_some_and(|s| s.is_null())
            }) =>
        {
            let list = SequenceBuilder::new()
                .insert_mapping(MappingBuilder::new())
                .build_document();
            let list = list
                .as_sequence()
                .ok_or_else(|| structure(manifest, "building a list"))?;
            list.set(0, item);
            parent.set(key, &list);
            Ok(())
        }
        _ => Err(structure(manifest, &format!("`spec.{key}` is not a list"))),
    }
}

/// Sets a scalar entry, keeping the quote style of the value it replaces.
fn set_scalar(mapping: &Mapping, key: &str, value: &str) {
    let quoted = mapping
        .get(key)
        .and_then(|node| node.as_scalar().map(|s| s.value()))
        .and_then(|raw| raw.chars().next());
    match quoted {
        Some('"') => mapping.set(key, ScalarValue::double_quoted(value)),
        Some('\'') => mapping.set(key, ScalarValue::single_quoted(value)),
        _ => mapping.set(key, value),
    }
}

fn finish(
    manifest: &Manifest,
    doc: &Document,
    expected: &OperatorAssignmentSpec,
    changes: Vec<String>,
) -> Result<Edited, EditError> {
    let unchanged = changes.is_empty();
    let text = if unchanged {
        manifest.text.clone()
    } else {
        doc.to_string()
    };
    let edited = Manifest::parse(&manifest.file, text.clone()).map_err(EditError::Invalid)?;
    if edited.assignment.spec != *expected
        || edited.assignment.metadata != manifest.assignment.metadata
    {
        return Err(EditError::Guard {
            file: manifest.file.clone(),
        });
    }
    Ok(Edited {
        text,
        manifest: edited,
        changes,
        path: if unchanged {
            EditPath::Unchanged
        } else {
            EditPath::General
        },
    })
}
