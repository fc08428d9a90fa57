//! The one rule for reading who owns a Camel K resource: its owner label,
//! else its owner annotation; and when both are set and name different
//! operators, the annotation, reported as a conflict.
//!
//! Upstream Camel K reads only the annotation, and what `kamel run -x`,
//! `kamel bind -x` or Helm's `operator.operatorId` create carries only the
//! annotation; this project adds the label so operators can filter on the
//! server. The two are written together, so they differ only when something
//! else changed one of them: most often a GitOps tool applying the
//! annotation from Git over a move. The operator that then acts is the one
//! the annotation names (every real Camel K operator obeys it, and the
//! admission policy reads owners the same way), so that is the owner; the
//! disagreement ([`ReadOwner::disagreeing_label`]) is reported and set right.
//! Every command, the plan, the sync, the handoff, the admission policy and
//! the audit judge read an owner through this rule, and a change of owner is
//! fenced on the key it was read from ([`OwnerKey`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::OPERATOR_ID_KEY;

/// Which owner key an owner was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OwnerKey {
    /// The label `camel.apache.org/operator.id` (set by this project).
    Label,
    /// The annotation of the same name: with no label (as upstream writes
    /// it), or with a label that names another operator.
    Annotation,
}

/// A resource's owner as read from its keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadOwner {
    /// The owner's operator id, as written (not checked).
    pub id: String,
    /// The key it was read from: a change of owner is fenced on it.
    pub key: OwnerKey,
    /// The label's value when label and annotation are both set and name
    /// different operators (the owner is then the annotation's).
    pub disagreeing_label: Option<String>,
}

impl ReadOwner {
    /// Whether the label and the annotation name different operators.
    pub fn keys_disagree(&self) -> bool {
        self.disagreeing_label.is_some()
    }
}

/// The owner named by `labels` and `annotations`: the label, else the
/// annotation, and the annotation when the two disagree; `None` when
/// neither is set.
pub fn owner_of(
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<ReadOwner> {
    owner_from_keys(key_value(labels), key_value(annotations))
}

fn key_value(map: Option<&BTreeMap<String, String>>) -> Option<&str> {
    map.and_then(|m| m.get(OPERATOR_ID_KEY)).map(String::as_str)
}

/// [`owner_of`] the two keys' values. An empty value counts as unset, as
/// upstream's `IsOperatorHandler` treats it.
pub fn owner_from_keys(label: Option<&str>, annotation: Option<&str>) -> Option<ReadOwner> {
    let label = label.filter(|v| !v.is_empty());
    let annotation = annotation.filter(|v| !v.is_empty());
    match (label, annotation) {
        (Some(l), Some(a)) if l != a => Some(ReadOwner {
            id: a.to_string(),
            key: OwnerKey::Annotation,
            disagreeing_label: Some(l.to_string()),
        }),
        (Some(l), _) => Some(ReadOwner {
            id: l.to_string(),
            key: OwnerKey::Label,
            disagreeing_label: None,
        }),
        (None, Some(a)) => Some(ReadOwner {
            id: a.to_string(),
            key: OwnerKey::Annotation,
            disagreeing_label: None,
        }),
        (None, None) => None,
    }
}

/// [`owner_of`] an object's metadata.
pub fn owner_of_meta(meta: &ObjectMeta) -> Option<ReadOwner> {
    owner_of(meta.labels.as_ref(), meta.annotations.as_ref())
}

/// The owner's id of an object's metadata, if any ([`owner_of`]).
pub fn owner_id(meta: &ObjectMeta) -> Option<String> {
    owner_of_meta(meta).map(|o| o.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(value: Option<&str>) -> Option<BTreeMap<String, String>> {
        value.map(|v| BTreeMap::from([(OPERATOR_ID_KEY.to_string(), v.to_string())]))
    }

    fn read(label: Option<&str>, annotation: Option<&str>) -> Option<ReadOwner> {
        owner_of(map(label).as_ref(), map(annotation).as_ref())
    }

    #[test]
    fn the_label_names_the_owner_and_the_annotation_stands_in_for_it() {
        // Disagreeing keys: the annotation, which upstream obeys, owns.
        let both = read(Some("operator-2"), Some("operator-1")).unwrap();
        assert_eq!(both.id, "operator-1");
        assert_eq!(both.key, OwnerKey::Annotation);
        assert_eq!(both.disagreeing_label.as_deref(), Some("operator-2"));

        let kamel = read(None, Some("operator-1")).unwrap();
        assert_eq!(kamel.id, "operator-1");
        assert_eq!(kamel.key, OwnerKey::Annotation);
        assert!(!kamel.keys_disagree());

        let ours = read(Some("operator-1"), Some("operator-1")).unwrap();
        assert_eq!(ours.key, OwnerKey::Label);
        assert!(!ours.keys_disagree());
    }

    #[test]
    fn no_key_or_empty_keys_mean_no_owner() {
        assert_eq!(read(None, None), None);
        assert_eq!(read(Some(""), Some("")), None);
        assert_eq!(
            read(Some(""), Some("operator-1")).unwrap().key,
            OwnerKey::Annotation
        );
        let other = BTreeMap::from([("app".to_string(), "x".to_string())]);
        assert_eq!(owner_of(Some(&other), None), None);
    }
}
