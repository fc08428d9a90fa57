//! [`OperatorId`]: the value of the owner key, checked to be a valid
//! Kubernetes label value on construction, so no invalid id exists past
//! parsing.

use std::borrow::Cow;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The id of a Camel K operator: a non-empty Kubernetes label value
/// (at most 63 characters, alphanumerics, `-`, `_`, `.`, starting and ending
/// with an alphanumeric).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct OperatorId(String);

/// Why a string is not an operator id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidOperatorId {
    /// The id is the empty string.
    #[error("an operator id cannot be empty")]
    Empty,
    /// The id is over 63 characters (the id given).
    #[error("operator id `{0}` is longer than 63 characters, the limit of a label value")]
    TooLong(String),
    /// The id has a character a label value cannot hold, or starts or ends with
    /// one that is not a letter or digit (the id given).
    #[error(
        "operator id `{0}` is not a valid label value: use letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit"
    )]
    Invalid(String),
}

impl OperatorId {
    /// Checks `id` against the rules of a label value (the id is one).
    pub fn new(id: impl Into<String>) -> Result<OperatorId, InvalidOperatorId> {
        let id = id.into();
        if id.is_empty() {
            return Err(InvalidOperatorId::Empty);
        }
        if id.len() > 63 {
            return Err(InvalidOperatorId::TooLong(id));
        }
        let bytes = id.as_bytes();
        let edge_ok = |b: u8| b.is_ascii_alphanumeric();
        let inner_ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
        if !edge_ok(bytes[0])
            || !edge_ok(bytes[bytes.len() - 1])
            || !bytes.iter().all(|&b| inner_ok(b))
        {
            return Err(InvalidOperatorId::Invalid(id));
        }
        Ok(OperatorId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for OperatorId {
    type Err = InvalidOperatorId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OperatorId::new(s)
    }
}

impl<'de> Deserialize<'de> for OperatorId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        OperatorId::new(text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for OperatorId {
    fn schema_name() -> Cow<'static, str> {
        "OperatorId".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": 63,
            "pattern": "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_value_rules() {
        assert!(OperatorId::new("operator-1").is_ok());
        assert!(OperatorId::new("a").is_ok());
        assert!(OperatorId::new("camel-k.v2_9").is_ok());
        assert_eq!(OperatorId::new(""), Err(InvalidOperatorId::Empty));
        assert!(matches!(
            OperatorId::new("-x"),
            Err(InvalidOperatorId::Invalid(_))
        ));
        assert!(matches!(
            OperatorId::new("x-"),
            Err(InvalidOperatorId::Invalid(_))
        ));
        assert!(matches!(
            OperatorId::new("Operator 1"),
            Err(InvalidOperatorId::Invalid(_))
        ));
        assert!(matches!(
            OperatorId::new("a/b"),
            Err(InvalidOperatorId::Invalid(_))
        ));
        assert!(matches!(
            OperatorId::new("x".repeat(64)),
            Err(InvalidOperatorId::TooLong(_))
        ));
        assert!(OperatorId::new("x".repeat(63)).is_ok());
    }
}
