//! The unknown-field check: every mapping key of the manifest must be a
//! property of the generated CRD schema at that place.
//!
//! Contract: the schema of [`crate::api::crd`] is the only list of fields;
//! an object whose schema declares no properties (such as `metadata.labels`)
//! or preserves unknown fields accepts any key.
//! Every unknown key is reported, each with the closest known field.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

use super::diagnostic::hint;
use super::tree::{FieldPath, Location, Node, Value};

/// An unknown key: where it is and the message.
pub(crate) struct UnknownField {
    pub(crate) at: Location,
    pub(crate) message: String,
}

pub(crate) fn check(root: &Node, schema: &JSONSchemaProps) -> Vec<UnknownField> {
    let mut found = Vec::new();
    walk(root, schema, &FieldPath::root(), &mut found);
    found
}

fn walk(node: &Node, schema: &JSONSchemaProps, path: &FieldPath, found: &mut Vec<UnknownField>) {
    match &node.value {
        Value::Mapping(entries) => {
            let Some(properties) = &schema.properties else {
                if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
                    for entry in entries {
                        walk(&entry.value, values, &path.key(&entry.key), found);
                    }
                }
                return;
            };
            if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
                return;
            }
            for entry in entries {
                match properties.get(&entry.key) {
                    Some(field) => walk(&entry.value, field, &path.key(&entry.key), found),
                    None => {
                        let place = if path.0.is_empty() {
                            "at the top level".to_string()
                        } else {
                            format!("in `{path}`")
                        };
                        let mut suggestion =
                            hint(&entry.key, properties.keys().map(String::as_str));
                        if suggestion.is_empty() {
                            suggestion = expected(properties.keys());
                        }
                        found.push(UnknownField {
                            at: entry.key_at,
                            message: format!("unknown field `{}` {place}{suggestion}", entry.key),
                        });
                    }
                }
            }
        }
        Value::Sequence(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
                for (i, node) in items.iter().enumerate() {
                    walk(node, item, &path.index(i), found);
                }
            }
        }
        Value::Scalar(_) | Value::Alias => {}
    }
}

fn expected<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let keys: Vec<_> = keys.map(|k| format!("`{k}`")).collect();
    format!("; expected one of {}", keys.join(", "))
}
