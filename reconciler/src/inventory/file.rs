//! Inventory files: the output of `kubectl get <kinds> -A -o json` (or
//! `-o yaml`), a `List` whose items are Camel K resources.
//!
//! Contract: only `apiVersion`, `kind`, `metadata.{name,namespace,labels,
//! annotations,ownerReferences}` and `status.phase` are read; other fields
//! are skipped unread. Each item becomes a [`Resource`] as a metadata list
//! item does (`Resource::from_metadata`). Items of kinds that are not Camel K kinds are an error naming
//! the item, never silently dropped; so is an item that lists a resource again
//! (a hand-edited or concatenated list), since the plan takes each resource
//! once. A file that is not such a list (a single object such as a
//! Deployment, a `ConfigMapList`, a JSON array, a list with no `items`) is an
//! error naming the kind it is and the kind expected: read as an empty
//! inventory it would plan nothing, silently.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{Inventory, Resource, ResourceRef};
use crate::camel_k::{CamelKind, GROUP};

/// Why an inventory file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum InventoryFileError {
    /// The file could not be read.
    #[error("cannot read inventory {file}: {source}")]
    Read {
        /// The file's path.
        file: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is neither a JSON nor a YAML Kubernetes `List`.
    #[error("inventory {file} is not a Kubernetes List in JSON or YAML: {message}")]
    Format {
        /// The file's path.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// The file is a Kubernetes object, but not a list of Camel K resources.
    #[error(
        "inventory {file} is {found}, not a List of Camel K resources: expected `kind: List` \
         (or IntegrationList, PipeList, ...) with `items`, as `kubectl get integrations,pipes \
         -A -o json` prints"
    )]
    Kind {
        /// The file's path.
        file: String,
        /// What it is instead (`a Deployment`, `a ConfigMapList`, `a List with no items`).
        found: String,
    },
    /// One item of the list is not a Camel K resource this tool can read.
    #[error("inventory {file}, item {index}: {message}")]
    Item {
        /// The file's path.
        file: String,
        /// The item's position in `items`, from 0.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
}

#[derive(Deserialize)]
struct List {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    items: Option<Vec<Item>>,
}

/// A [`List`] from a mapping only: a derived struct also reads a sequence
/// (as its fields in order), which would word a JSON array's error in terms
/// of the first item.
struct TopLevel(List);

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Mapping;
        impl<'de> serde::de::Visitor<'de> for Mapping {
            type Value = List;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a Kubernetes List (a mapping with `kind: List` and `items`)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<List, A::Error> {
                List::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(Mapping).map(TopLevel)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    #[serde(default)]
    api_version: String,
    kind: String,
    metadata: Metadata,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "ownerReferences")]
    owner_references: Vec<OwnerRef>,
}

/// The fields of an owner reference that matter here (`uid` and the rest
/// may be missing from a hand-written inventory).
#[derive(Deserialize)]
struct OwnerRef {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    controller: Option<bool>,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    phase: Option<String>,
}

/// Parses an inventory from `text`; `file` names it in messages.
pub fn parse(file: &str, text: &str) -> Result<Inventory, InventoryFileError> {
    let TopLevel(list) = if text.trim_start().starts_with(['{', '[', '"']) {
        serde_json::from_str(text).map_err(|e| InventoryFileError::Format {
            file: file.to_string(),
            message: e.to_string(),
        })?
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            let text = e.without_snippet().to_string();
            let first = text.lines().next().unwrap_or_default();
            InventoryFileError::Format {
                file: file.to_string(),
                // In the terms of this file rather than of the parser.
                message: first.replace(
                    "expected mapping start",
                    "expected a Kubernetes List (a mapping with `kind: List` and `items`)",
                ),
            }
        })?
    };
    let kind_error = |found: String| InventoryFileError::Kind {
        file: file.to_string(),
        found,
    };
    // `List` (kubectl), `<Kind>List` (the API), or no kind (hand-written).
    let kind = list.kind.unwrap_or_default();
    let camel_list = kind
        .strip_suffix("List")
        .is_some_and(|k| k.is_empty() || CamelKind::ALL.iter().any(|c| c.kind() == k));
    if !kind.is_empty() && !camel_list {
        let article = if kind.starts_with(['A', 'E', 'I', 'O', 'U']) {
            "an"
        } else {
            "a"
        };
        return Err(kind_error(format!("{article} {kind}")));
    }
    let Some(items) = list.items else {
        let what = if kind.is_empty() { "a mapping" } else { &kind };
        return Err(kind_error(format!("{what} with no `items`")));
    };
    let mut resources = Vec::with_capacity(items.len());
    let mut seen: HashMap<ResourceRef, usize> = HashMap::new();
    for (index, item) in items.into_iter().enumerate() {
        let item_error = |message: String| InventoryFileError::Item {
            file: file.to_string(),
            index,
            message,
        };
        let kind = CamelKind::ALL
            .into_iter()
            .find(|k| k.kind() == item.kind)
            .ok_or_else(|| item_error(format!("`{}` is not a Camel K kind", item.kind)))?;
        if !item.api_version.is_empty() && !item.api_version.starts_with(GROUP) {
            return Err(item_error(format!(
                "apiVersion `{}` is not in the {GROUP} group",
                item.api_version
            )));
        }
        let namespace = item
            .metadata
            .namespace
            .ok_or_else(|| item_error(format!("{kind} {} has no namespace", item.metadata.name)))?;
        let owner_references = item
            .metadata
            .owner_references
            .into_iter()
            .map(|o| OwnerReference {
                api_version: o.api_version,
                kind: o.kind,
                name: o.name,
                controller: o.controller,
                ..Default::default()
            })
            .collect();
        let meta = ObjectMeta {
            name: Some(item.metadata.name),
            namespace: Some(namespace),
            labels: item.metadata.labels,
            annotations: item.metadata.annotations,
            owner_references: Some(owner_references),
            ..Default::default()
        };
        let phase = item.status.and_then(|s| s.phase);
        let resource = Resource::from_metadata(kind, meta, phase);
        if let Some(first) = seen.insert(resource.id.clone(), index) {
            return Err(item_error(format!(
                "{} is listed again (first as item {first})",
                resource.id
            )));
        }
        resources.push(resource);
    }
    Ok(Inventory::from(resources))
}

/// Reads an inventory file.
pub fn read(path: &std::path::Path, file: &str) -> Result<Inventory, InventoryFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| InventoryFileError::Read {
        file: file.to_string(),
        source,
    })?;
    parse(file, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kubectl_lists() {
        let json = r#"{"apiVersion":"v1","kind":"List","items":[
          {"apiVersion":"camel.apache.org/v1","kind":"Integration",
           "metadata":{"name":"orders","namespace":"shop","labels":{"camel.apache.org/operator.id":"operator-1","app":"x"},
                       "annotations":{"camel.apache.org/operator.id":"operator-1"}},
           "spec":{"sources":[]},"status":{"phase":"Running"}}]}"#;
        let inventory = parse("inv.json", json).unwrap();
        let r = &inventory.resources[0];
        assert_eq!(r.id.to_string(), "Integration shop/orders");
        assert_eq!(r.phase.as_deref(), Some("Running"));
        assert_eq!(r.owner_annotation.as_deref(), Some("operator-1"));

        let yaml = "items:\n- kind: Pipe\n  metadata: {name: p, namespace: shop}\n";
        assert_eq!(parse("inv.yaml", yaml).unwrap().resources[0].phase, None);

        let bad = "items:\n- kind: Deployment\n  metadata: {name: p, namespace: shop}\n";
        assert!(
            parse("inv.yaml", bad)
                .unwrap_err()
                .to_string()
                .contains("item 0")
        );
    }

    // Found by the `inventory` fuzz target: a repeated item made the plan
    // list one resource twice, as two moves or a move and an unchanged one.
    #[test]
    fn a_resource_listed_twice_is_an_error_naming_both_items() {
        let yaml = "items:
- kind: Pipe
  metadata: {name: events, namespace: shop, labels: {camel.apache.org/operator.id: operator-1}}
- kind: Integration
  metadata: {name: events, namespace: shop}
- kind: Pipe
  metadata: {name: events, namespace: shop, labels: {camel.apache.org/operator.id: operator-2}}
";
        let error = parse("inv.yaml", yaml).unwrap_err().to_string();
        assert_eq!(
            error,
            "inventory inv.yaml, item 2: Pipe shop/events is listed again (first as item 0)"
        );
    }

    #[test]
    fn an_integration_controlled_by_a_pipe_names_it() {
        let yaml = "items:
- kind: Integration
  metadata:
    name: events
    namespace: shop
    ownerReferences:
    - {apiVersion: camel.apache.org/v1, kind: Pipe, name: events, uid: u, controller: true}
- kind: Integration
  metadata:
    name: other
    namespace: shop
    ownerReferences:
    - {apiVersion: camel.apache.org/v1, kind: Pipe, name: events, uid: u}
";
        let inventory = parse("inv.yaml", yaml).unwrap();
        let pipe = inventory.resources[0].created_by.as_ref().unwrap();
        assert_eq!(pipe.to_string(), "Pipe shop/events");
        assert_eq!(
            inventory.resources[1].created_by, None,
            "not its controller"
        );
    }
}
