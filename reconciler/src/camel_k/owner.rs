//! The one rule for reading who owns a Camel K resource: its owner label,
//! else its owner annotation.
//!
//! Upstream Camel K reads only the annotation, and what `kamel run -x`,
//! `kamel bind -x` or Helm's `operator.operatorId` create carries only the
//! annotation; this project adds the label so operators can filter on the
//! server. Every command, the plan, the sync and the handoff read an owner
//! through [`owner_of`], and fence a change of owner on the key it was read
//! from ([`OwnerKey`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::OPERATOR_ID_KEY;

/// Which owner key an owner was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OwnerKey {
    /// The label `camel.apache.org/operator.id` (set by this project).
    Label,
    /// The annotation of the same name, with no label (as upstream writes it).
    Annotation,
}

/// A resource's owner as read from its keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadOwner {
    /// The owner's operator id, as written (not checked).
    pub id: String,
    /// The key it was read from: a change of owner is fenced on it.
    pub key: OwnerKey,
    /// The label and the annotation are both set and name different operators.
    pub keys_disagree: bool,
}

/// The owner named by `labels` and `annotations`: the label, else the
/// annotation; `None` when neither is set.
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
        (Some(l), a) => Some(ReadOwner {
            id: l.to_string(),
            key: OwnerKey::Label,
            keys_disagree: a.is_some_and(|a| a != l),
        }),
        (None, Some(a)) => Some(ReadOwner {
            id: a.to_string(),
            key: OwnerKey::Annotation,
            keys_disagree: false,
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
    fn the_label_wins_and_the_annotation_stands_in_for_it() {
        let both = read(Some("operator-2"), Some("operator-1")).unwrap();
        assert_eq!(both.id, "operator-2");
        assert_eq!(both.key, OwnerKey::Label);
        assert!(both.keys_disagree);

        let kamel = read(None, Some("operator-1")).unwrap();
        assert_eq!(kamel.id, "operator-1");
        assert_eq!(kamel.key, OwnerKey::Annotation);
        assert!(!kamel.keys_disagree);

        let ours = read(Some("operator-1"), Some("operator-1")).unwrap();
        assert_eq!(ours.key, OwnerKey::Label);
        assert!(!ours.keys_disagree);
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
