//! The fenced patch builders (`handoff::fence::{flip, fenced, assign}`) on
//! arbitrary objects: owner label and annotation present, absent, empty or
//! disagreeing, maps present or absent, any phase and resourceVersion.
//!
//! Checks the fence: the patch's tests come before its writes, and it tests
//! the owner it was given on the key that owner is read from (the label,
//! else the annotation); applied to the object it was built from, it
//! succeeds exactly when that key names the given owner (and the guard's
//! phase holds), and then changes only the two owner keys; applied to the
//! object after someone else changed the owner, it fails.
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use camelk_reconciler::camel_k::{OPERATOR_ID_KEY, OwnerKey, owner_of_meta};
use camelk_reconciler::handoff::fence::{FlipGuard, assign, fenced, flip};
use kube::api::DynamicObject;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const VALUES: [&str; 6] = ["operator-1", "operator-2", "", "a/b~c", "operator-3", "x"];

#[derive(Arbitrary, Debug)]
enum Text {
    Known(u8),
    Any(String),
}

impl Text {
    fn get(&self) -> String {
        match self {
            Text::Known(i) => VALUES[*i as usize % VALUES.len()].to_string(),
            Text::Any(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// `None`: no labels map at all; `Some`: the map, with or without the key.
    labels: Option<(Option<Text>, bool)>,
    annotations: Option<(Option<Text>, bool)>,
    resource_version: Option<u16>,
    phase: Option<Text>,
    from: Text,
    to: Text,
    guard: Option<Text>,
    /// A write to fence, as `fenced` takes it.
    write: Option<(Text, Text)>,
}

fn map(entry: &Option<(Option<Text>, bool)>, other: &str) -> Option<BTreeMap<String, String>> {
    entry.as_ref().map(|(owner, with_other)| {
        let mut m = BTreeMap::new();
        if let Some(o) = owner {
            m.insert(OPERATOR_ID_KEY.to_string(), o.get());
        }
        if *with_other {
            m.insert(other.to_string(), "keep".to_string());
        }
        m
    })
}

fn apply(doc: &Value, patch: &json_patch::Patch) -> Option<Value> {
    let mut doc = doc.clone();
    json_patch::patch(&mut doc, patch).ok().map(|()| doc)
}

fn ops(patch: &json_patch::Patch) -> Vec<Value> {
    match serde_json::to_value(patch).expect("serializable") {
        Value::Array(ops) => ops,
        other => panic!("a patch is a list: {other}"),
    }
}

/// The patch's leading `test` operations (before its first write).
fn leading_tests(patch: &json_patch::Patch) -> Vec<Value> {
    let ops = ops(patch);
    let tests: Vec<Value> = ops
        .iter()
        .take_while(|op| op["op"] == "test")
        .cloned()
        .collect();
    assert!(
        ops[tests.len()..].iter().all(|op| op["op"] != "test"),
        "a test after a write: {ops:?}"
    );
    tests
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fuzz_target!(|input: Input| {
    let mut object = json!({
        "apiVersion": "camel.apache.org/v1",
        "kind": "Integration",
        "metadata": { "name": "orders", "namespace": "shop" },
    });
    if let Some(labels) = map(&input.labels, "app") {
        object["metadata"]["labels"] = json!(labels);
    }
    if let Some(annotations) = map(&input.annotations, "note") {
        object["metadata"]["annotations"] = json!(annotations);
    }
    if let Some(rv) = input.resource_version {
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
    }
    if let Some(phase) = &input.phase {
        object["status"] = json!({ "phase": phase.get() });
    }
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    // The document the API server would patch: the object as it serializes.
    let doc = serde_json::to_value(&dynamic).expect("serializable");
    let (from, to) = (input.from.get(), input.to.get());
    // Callers pass an operator id as `from`, never an empty one (an empty
    // key is read as no owner at all).
    if from.is_empty() {
        return;
    }
    let guard = FlipGuard {
        phase: input.guard.as_ref().map(Text::get),
    };

    // flip: fenced on the key the owner is read from.
    let read = owner_of_meta(&dynamic.metadata);
    let label_path = format!("/metadata/labels/{}", escape(OPERATOR_ID_KEY));
    let annotation_path = format!("/metadata/annotations/{}", escape(OPERATOR_ID_KEY));
    let fence_path = match &read {
        Some(r) if r.key == OwnerKey::Annotation => &annotation_path,
        _ => &label_path,
    };
    let patch = flip(&dynamic, &from, &to, &guard);
    let tests = leading_tests(&patch);
    assert!(
        tests
            .iter()
            .any(|t| t["path"] == fence_path.as_str() && t["value"] == from.as_str()),
        "flip does not test {fence_path} = {from:?}: {tests:?}"
    );
    let owned = read.as_ref().is_some_and(|r| r.id == from);
    let phase_now = doc["status"]["phase"].as_str();
    let guard_holds = match &input.guard {
        None => true,
        Some(p) => match phase_now {
            Some(now) => now == p.get(),
            None => doc["metadata"]["resourceVersion"].is_string(),
        },
    };
    let annotation_fence_holds = read.as_ref().is_none_or(|r| r.key == OwnerKey::Label)
        || doc["metadata"]["resourceVersion"].is_string();
    match apply(&doc, &patch) {
        Some(after) => {
            assert!(
                owned,
                "flip applied though {from:?} does not own it: {read:?}"
            );
            assert_eq!(after["metadata"]["labels"][OPERATOR_ID_KEY], to.as_str());
            assert_eq!(
                after["metadata"]["annotations"][OPERATOR_ID_KEY],
                to.as_str()
            );
            // Nothing else changed.
            let mut a = after.clone();
            let mut b = doc.clone();
            for d in [&mut a, &mut b] {
                let meta = d["metadata"].as_object_mut().expect("metadata");
                for m in ["labels", "annotations"] {
                    if let Some(map) = meta.get_mut(m).and_then(Value::as_object_mut) {
                        map.remove(OPERATOR_ID_KEY);
                        if map.is_empty() {
                            meta.remove(m);
                        }
                    }
                }
            }
            assert_eq!(a, b, "flip changed more than the owner keys");
        }
        None => assert!(
            !owned || !guard_holds || !annotation_fence_holds,
            "flip refused though {from:?} owns it by {fence_path}"
        ),
    }
    // Someone else took it since the read: the flip must fail.
    if owned {
        let mut taken = doc.clone();
        let other = format!("{from}-other");
        match read.as_ref().map(|r| r.key) {
            Some(OwnerKey::Label) => {
                taken["metadata"]["labels"][OPERATOR_ID_KEY] = json!(other);
            }
            _ => {
                // A label added (a new resourceVersion), as by another flip.
                let labels = taken["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .entry("labels")
                    .or_insert_with(|| json!({}));
                labels[OPERATOR_ID_KEY] = json!(other);
                taken["metadata"]["resourceVersion"] = json!("changed");
            }
        }
        assert!(
            apply(&taken, &patch).is_none(),
            "flip applied after the owner changed to {other:?}"
        );
    }

    // fenced: its first op tests the label names the owner.
    let write = input.write.as_ref().map(|(k, v)| {
        json!({ "op": "add", "path": format!("/metadata/annotations/{}", escape(&k.get())), "value": v.get() })
    });
    let patch = fenced(&from, write.clone());
    let tests = leading_tests(&patch);
    assert_eq!(
        tests.first(),
        Some(&json!({ "op": "test", "path": label_path, "value": from })),
        "fenced does not test the owner label first"
    );
    if doc["metadata"]["labels"][OPERATOR_ID_KEY] != from.as_str() {
        assert!(
            apply(&doc, &patch).is_none(),
            "a fenced write by a non-owner"
        );
    } else if write.is_none() {
        assert_eq!(apply(&doc, &patch).as_ref(), Some(&doc));
    }

    // assign: applied only to the object as read.
    let patch = assign(&dynamic, &to, &guard);
    let tests = leading_tests(&patch);
    assert!(
        tests
            .iter()
            .any(|t| t["path"] == "/metadata/resourceVersion"),
        "assign does not test the resourceVersion: {tests:?}"
    );
    let mut changed = doc.clone();
    changed["metadata"]["resourceVersion"] = json!("changed");
    assert!(
        apply(&changed, &patch).is_none(),
        "assign applied after a change"
    );
});
