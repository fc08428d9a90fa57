//! Fenced writes: JSON patches whose first operations `test` that the owner
//! label still names the writer, so the API server refuses (422) a write by
//! an operator that lost ownership, however late it arrives.
//!
//! Every write to a Camel K resource by its owner goes through `fenced`,
//! and every change of owner through [`flip`]: label and annotation change
//! together, in one write, only if the key the owner was read from (the
//! label, else the annotation) still names the expected owner.
//! Patches are built from the object as observed; if the object changed
//! shape since (say its annotations map vanished), the patch fails and the
//! caller re-reads, it never clobbers.

use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::camel_k::{OPERATOR_ID_KEY, OwnerKey, owner_of_meta};

/// JSON-pointer path of the owner label (`/` in the key escaped as `~1`).
pub(crate) fn owner_label_path() -> String {
    format!("/metadata/labels/{}", escape(OPERATOR_ID_KEY))
}

fn owner_annotation_path() -> String {
    format!("/metadata/annotations/{}", escape(OPERATOR_ID_KEY))
}

/// Escapes one JSON-pointer token (RFC 6901).
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The `test` op that fences a write to `owner`.
pub(crate) fn owner_test(owner: &str) -> Value {
    json!({ "op": "test", "path": owner_label_path(), "value": owner })
}

/// `ops` preceded by the owner test: applied only while the label names `owner`.
pub fn fenced(owner: &str, ops: impl IntoIterator<Item = Value>) -> json_patch::Patch {
    let mut all = vec![owner_test(owner)];
    all.extend(ops);
    to_patch(all)
}

/// Extra preconditions of a flip beyond the owner label.
#[derive(Clone, Debug, Default)]
pub struct FlipGuard {
    /// `status.phase` must still be this (the upstream-compatible release
    /// checks the phase it judged stable). `Some("")` means "no phase".
    pub phase: Option<String>,
}

/// The one write that moves `object` from `from` to `to`: tests that the
/// key `from` was read from still names it (and any guard), then sets label
/// and annotation to `to`. With `from == to` it adopts a resource whose
/// annotation alone names its owner: the label is added, nothing else changes.
pub fn flip(object: &DynamicObject, from: &str, to: &str, guard: &FlipGuard) -> json_patch::Patch {
    let mut ops = owner_fence(object, from);
    if let Some(phase) = &guard.phase {
        ops.push(phase_test(object, phase));
    }
    ops.extend(set_owner_keys(object, to));
    to_patch(ops)
}

/// The tests that `owner` still owns `object` by the key it was read from
/// ([`owner_of_meta`]): the label; or, for a resource as `kamel` creates it,
/// the annotation plus the resourceVersion, since a JSON patch cannot test
/// that the label is still absent.
fn owner_fence(object: &DynamicObject, owner: &str) -> Vec<Value> {
    match owner_of_meta(&object.metadata) {
        Some(read) if read.key == OwnerKey::Annotation => vec![
            json!({ "op": "test", "path": owner_annotation_path(), "value": owner }),
            resource_version_test(object),
        ],
        _ => vec![owner_test(owner)],
    }
}

/// Sets both owner keys to `to`, creating the label or annotation map when
/// the object has none (`add` replaces a member that exists).
fn set_owner_keys(object: &DynamicObject, to: &str) -> [Value; 2] {
    let label = match &object.metadata.labels {
        Some(_) => json!({ "op": "add", "path": owner_label_path(), "value": to }),
        None => {
            json!({ "op": "add", "path": "/metadata/labels", "value": { OPERATOR_ID_KEY: to } })
        }
    };
    let annotation = match &object.metadata.annotations {
        Some(_) => json!({ "op": "add", "path": owner_annotation_path(), "value": to }),
        None => {
            json!({ "op": "add", "path": "/metadata/annotations", "value": { OPERATOR_ID_KEY: to } })
        }
    };
    [label, annotation]
}

/// The first assignment of an object with no owner key: applied only while
/// it is unchanged since read (a JSON patch cannot test that a key is
/// absent), and, with a guard, only while its phase is the one judged stable.
pub fn assign(object: &DynamicObject, to: &str, guard: &FlipGuard) -> json_patch::Patch {
    let mut ops = vec![resource_version_test(object)];
    if let Some(phase) = &guard.phase {
        ops.push(phase_test(object, phase));
    }
    ops.extend(set_owner_keys(object, to));
    to_patch(ops)
}

fn resource_version_test(object: &DynamicObject) -> Value {
    json!({ "op": "test", "path": "/metadata/resourceVersion", "value": object.metadata.resource_version })
}

fn phase_test(object: &DynamicObject, phase: &str) -> Value {
    let has_phase = object
        .data
        .get("status")
        .and_then(|s| s.get("phase"))
        .is_some();
    if has_phase {
        json!({ "op": "test", "path": "/status/phase", "value": phase })
    } else {
        // No phase seen: require that there still is none (status may be absent).
        resource_version_test(object)
    }
}

fn to_patch(ops: Vec<Value>) -> json_patch::Patch {
    serde_json::from_value(Value::Array(ops)).expect("well-formed JSON patch operations")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        labels: Option<Value>,
        annotations: Option<Value>,
        status: Option<Value>,
    ) -> DynamicObject {
        let mut meta = json!({ "name": "orders", "namespace": "shop", "resourceVersion": "7" });
        if let Some(l) = labels {
            meta["labels"] = l;
        }
        if let Some(a) = annotations {
            meta["annotations"] = a;
        }
        let mut obj =
            json!({ "apiVersion": "camel.apache.org/v1", "kind": "Integration", "metadata": meta });
        if let Some(s) = status {
            obj["status"] = s;
        }
        serde_json::from_value(obj).unwrap()
    }

    fn apply(
        obj: &DynamicObject,
        patch: &json_patch::Patch,
    ) -> Result<Value, json_patch::PatchError> {
        let mut doc = serde_json::to_value(obj).unwrap();
        json_patch::patch(&mut doc, patch)?;
        Ok(doc)
    }

    #[test]
    fn flip_sets_label_and_annotation_when_owner_matches() {
        let obj = object(
            Some(json!({ OPERATOR_ID_KEY: "operator-1", "app": "orders" })),
            Some(json!({ "note": "keep me" })),
            None,
        );
        let out = apply(
            &obj,
            &flip(&obj, "operator-1", "operator-2", &FlipGuard::default()),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"][OPERATOR_ID_KEY], "operator-2");
        assert_eq!(
            out["metadata"]["annotations"][OPERATOR_ID_KEY],
            "operator-2"
        );
        assert_eq!(out["metadata"]["labels"]["app"], "orders");
        assert_eq!(out["metadata"]["annotations"]["note"], "keep me");
    }

    #[test]
    fn flip_is_refused_when_another_operator_owns_it() {
        let obj = object(Some(json!({ OPERATOR_ID_KEY: "operator-3" })), None, None);
        assert!(
            apply(
                &obj,
                &flip(&obj, "operator-1", "operator-2", &FlipGuard::default())
            )
            .is_err()
        );
    }

    #[test]
    fn flip_creates_the_annotations_map_when_missing() {
        let obj = object(Some(json!({ OPERATOR_ID_KEY: "operator-1" })), None, None);
        let out = apply(
            &obj,
            &flip(&obj, "operator-1", "operator-2", &FlipGuard::default()),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["annotations"],
            json!({ OPERATOR_ID_KEY: "operator-2" })
        );
    }

    #[test]
    fn phase_guard_refuses_a_changed_phase() {
        let seen = object(
            Some(json!({ OPERATOR_ID_KEY: "operator-1" })),
            None,
            Some(json!({ "phase": "Running" })),
        );
        let guard = FlipGuard {
            phase: Some("Running".into()),
        };
        let patch = flip(&seen, "operator-1", "operator-2", &guard);
        assert!(apply(&seen, &patch).is_ok());
        let now = object(
            Some(json!({ OPERATOR_ID_KEY: "operator-1" })),
            None,
            Some(json!({ "phase": "Deploying" })),
        );
        assert!(apply(&now, &patch).is_err());
    }

    #[test]
    fn fenced_write_needs_the_owner_label() {
        let op = json!({ "op": "add", "path": "/status", "value": { "phase": "Initialization" } });
        let owned = object(Some(json!({ OPERATOR_ID_KEY: "operator-1" })), None, None);
        assert!(apply(&owned, &fenced("operator-1", [op.clone()])).is_ok());
        assert!(apply(&owned, &fenced("operator-2", [op.clone()])).is_err());
        let unlabelled = object(None, None, None);
        assert!(apply(&unlabelled, &fenced("operator-1", [op])).is_err());
    }

    #[test]
    fn assign_labels_an_unowned_object() {
        let obj = object(None, None, None);
        let out = apply(&obj, &assign(&obj, "operator-1", &FlipGuard::default())).unwrap();
        assert_eq!(out["metadata"]["labels"][OPERATOR_ID_KEY], "operator-1");
        assert_eq!(
            out["metadata"]["annotations"][OPERATOR_ID_KEY],
            "operator-1"
        );
    }

    #[test]
    fn assign_is_refused_once_the_object_changed() {
        let seen = object(Some(json!({ "app": "orders" })), None, None);
        let patch = assign(&seen, "operator-1", &FlipGuard::default());
        let mut now = serde_json::to_value(&seen).unwrap();
        now["metadata"]["resourceVersion"] = json!("8");
        now["metadata"]["labels"][OPERATOR_ID_KEY] = json!("operator-2");
        assert!(json_patch::patch(&mut now, &patch).is_err());
        let out = apply(&seen, &patch).unwrap();
        assert_eq!(out["metadata"]["labels"]["app"], "orders");
        assert_eq!(out["metadata"]["labels"][OPERATOR_ID_KEY], "operator-1");
    }

    #[test]
    fn an_annotation_only_owner_is_fenced_on_its_annotation() {
        // As `kamel run -x` creates it: no labels at all.
        let kamel = object(None, Some(json!({ OPERATOR_ID_KEY: "operator-1" })), None);
        let out = apply(
            &kamel,
            &flip(&kamel, "operator-1", "operator-2", &FlipGuard::default()),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"][OPERATOR_ID_KEY], "operator-2");
        assert_eq!(
            out["metadata"]["annotations"][OPERATOR_ID_KEY],
            "operator-2"
        );
        // Another operator named by the annotation: refused.
        assert!(
            apply(
                &kamel,
                &flip(&kamel, "operator-3", "operator-2", &FlipGuard::default())
            )
            .is_err()
        );
        // A label added since the read (a new resourceVersion): refused.
        let patch = flip(&kamel, "operator-1", "operator-2", &FlipGuard::default());
        let mut now = serde_json::to_value(&kamel).unwrap();
        now["metadata"]["resourceVersion"] = json!("8");
        now["metadata"]["labels"] = json!({ OPERATOR_ID_KEY: "operator-3" });
        assert!(json_patch::patch(&mut now, &patch).is_err());
    }

    #[test]
    fn adoption_adds_the_label_and_changes_nothing_else() {
        let kamel = object(
            Some(json!({ "app": "orders" })),
            Some(json!({ OPERATOR_ID_KEY: "operator-1", "note": "keep me" })),
            Some(json!({ "phase": "Running" })),
        );
        let before = serde_json::to_value(&kamel).unwrap();
        let out = apply(
            &kamel,
            &flip(&kamel, "operator-1", "operator-1", &FlipGuard::default()),
        )
        .unwrap();
        let mut expected = before;
        expected["metadata"]["labels"][OPERATOR_ID_KEY] = json!("operator-1");
        assert_eq!(out, expected);
    }
}
