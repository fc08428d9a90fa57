//! Reading the status upstream Camel K operators write: phase, conditions,
//! and the kit an Integration runs on.
//!
//! Contract: pure accessors over a [`DynamicObject`]; a field that is absent or
//! of another type reads as `None`, never as an error.

use kube::api::DynamicObject;

/// `status.phase` of an object, if any.
pub fn phase(object: &DynamicObject) -> Option<&str> {
    object.data.get("status")?.get("phase")?.as_str()
}

/// Field `field` (`status`, `reason`, `lastTransitionTime`, ...) of the
/// condition `type_`, if present and a string.
pub(crate) fn condition_field<'a>(
    object: &'a DynamicObject,
    type_: &str,
    field: &str,
) -> Option<&'a str> {
    object
        .data
        .get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))?
        .get(field)?
        .as_str()
}

/// Status of the condition `type_` (`"True"`, `"False"`, ...), if present.
pub fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a str> {
    condition_field(object, type_, "status")
}

/// Why the condition `type_` is as it is: its `reason` and `message`, as
/// `reason: message` (either alone when the other is absent or empty).
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn condition_cause(object: &DynamicObject, type_: &str) -> Option<String> {
    let text = |key| condition_field(object, type_, key).filter(|v| !v.is_empty());
    match (text("reason"), text("message")) {
        (Some(reason), Some(message)) => Some(format!("{reason}: {message}")),
        (Some(one), None) | (None, Some(one)) => Some(one.to_string()),
        (None, None) => None,
    }
}

/// Name of the IntegrationKit an Integration uses (`status.integrationKit.name`).
pub fn kit_name(integration: &DynamicObject) -> Option<&str> {
    integration
        .data
        .get("status")?
        .get("integrationKit")?
        .get("name")?
        .as_str()
}
