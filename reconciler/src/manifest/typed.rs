//! Typed values read from the positioned [`Tree`](super::Tree), so a
//! manifest is parsed once (the tree) instead of twice (the tree, then
//! `serde-saphyr` over the same text).
//!
//! Contract: [`from_tree`] succeeds only where the reading is unambiguous and
//! matches what `serde-saphyr` reads from the same text: it refuses (with
//! [`Unsupported`]) tags, anchors and aliases, duplicate keys, floats, plain
//! scalars that YAML could read as null, a boolean or a number where a string
//! is wanted, and anything else it is not sure of. The caller then
//! deserializes the text with `serde-saphyr`, which either gives the value
//! or the error message the user sees; so messages never come from here.
//! A property test compares both readers.

use std::collections::HashSet;
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

use super::tree::{Entry, Node, Style, Value};

/// This reader is not sure; ask `serde-saphyr`.
#[derive(Debug)]
pub struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl de::Error for Unsupported {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Unsupported(message.to_string())
    }
}

/// The typed value of `node`, when this reader is sure of it.
pub fn from_tree<T: DeserializeOwned>(node: &Node) -> Result<T, Unsupported> {
    T::deserialize(NodeDe(node))
}

fn unsupported<T>(what: &str) -> Result<T, Unsupported> {
    Err(Unsupported(what.to_string()))
}

/// A plain scalar YAML (1.1 or 1.2) might read as something other than a
/// string.
fn ambiguous(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "" | "~" | "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
    ) || (text
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'))
        // Made only of what numbers (decimal, hex, octal, binary, floats,
        // sexagesimal) and dates are made of; `30s` or `10%` are not.
        && text.bytes().all(|b| {
            b.is_ascii_hexdigit()
                || matches!(b, b'x' | b'X' | b'o' | b'O' | b'_' | b'.' | b'+' | b'-' | b':')
        }))
        || lower.starts_with(".inf")
        || lower.starts_with(".nan")
        || lower.starts_with("-.inf")
        || lower.starts_with("+.inf")
}

fn null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A decimal integer without sign tricks or leading zeros.
fn integer(text: &str) -> Option<i128> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    text.parse().ok()
}

struct NodeDe<'a>(&'a Node);

impl NodeDe<'_> {
    fn plain(&self) -> Option<&str> {
        match (&self.0.value, self.0.style) {
            (Value::Scalar(text), Style::Plain) => Some(text),
            _ => None,
        }
    }

    fn string(&self) -> Result<&str, Unsupported> {
        match (&self.0.value, self.0.style) {
            (Value::Scalar(text), Style::Plain) if ambiguous(text) => {
                unsupported("an ambiguous plain scalar")
            }
            (Value::Scalar(text), _) => Ok(text),
            _ => unsupported("not a scalar"),
        }
    }

    fn integer(&self) -> Result<i128, Unsupported> {
        self.plain()
            .and_then(integer)
            .map_or_else(|| unsupported("not an integer"), Ok)
    }
}

macro_rules! integers {
    ($($method:ident => $visit:ident as $ty:ty,)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
            let value = <$ty>::try_from(self.integer()?)
                .map_err(|_| Unsupported("integer out of range".into()))?;
            visitor.$visit(value)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDe<'_> {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match &self.0.value {
            Value::Scalar(text) if self.0.style == Style::Plain => {
                if null(text) {
                    visitor.visit_unit()
                } else if text == "true" || text == "false" {
                    visitor.visit_bool(text == "true")
                } else if let Some(n) = integer(text) {
                    match u64::try_from(n) {
                        Ok(n) => visitor.visit_u64(n),
                        Err(_) => visitor.visit_i64(
                            i64::try_from(n).map_err(|_| Unsupported("a big integer".into()))?,
                        ),
                    }
                } else if ambiguous(text) {
                    unsupported("an ambiguous plain scalar")
                } else {
                    visitor.visit_str(text)
                }
            }
            Value::Scalar(text) => visitor.visit_str(text),
            Value::Sequence(_) => self.deserialize_seq(visitor),
            Value::Mapping(_) => self.deserialize_map(visitor),
            Value::Alias => unsupported("an alias"),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.plain() {
            Some("true") => visitor.visit_bool(true),
            Some("false") => visitor.visit_bool(false),
            _ => unsupported("not a boolean"),
        }
    }

    integers! {
        deserialize_i8 => visit_i8 as i8,
        deserialize_i16 => visit_i16 as i16,
        deserialize_i32 => visit_i32 as i32,
        deserialize_i64 => visit_i64 as i64,
        deserialize_u8 => visit_u8 as u8,
        deserialize_u16 => visit_u16 as u16,
        deserialize_u32 => visit_u32 as u32,
        deserialize_u64 => visit_u64 as u64,
    }

    fn deserialize_f32<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("a float")
    }

    fn deserialize_f64<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("a float")
    }

    fn deserialize_char<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("a char")
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_str(self.string()?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("bytes")
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Unsupported> {
        unsupported("bytes")
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.plain() {
            Some(text) if null(text) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match self.plain() {
            Some(text) if null(text) => visitor.visit_unit(),
            _ => unsupported("not null"),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match &self.0.value {
            Value::Sequence(items) => visitor.visit_seq(Items(items.iter())),
            _ => unsupported("not a list"),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        match &self.0.value {
            Value::Mapping(entries) => {
                let mut seen = HashSet::with_capacity(entries.len());
                if !entries.iter().all(|e| seen.insert(e.key.as_str())) {
                    return unsupported("a duplicate key");
                }
                visitor.visit_map(Entries {
                    entries: entries.iter(),
                    value: None,
                })
            }
            _ => unsupported("not a mapping"),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Unsupported> {
        let variant: &str = self.string()?;
        visitor.visit_enum(variant.into_deserializer())
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsupported> {
        visitor.visit_unit()
    }
}

struct Items<'a>(std::slice::Iter<'a, Node>);

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = Unsupported;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Unsupported> {
        self.0
            .next()
            .map(|node| seed.deserialize(NodeDe(node)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'a> {
    entries: std::slice::Iter<'a, Entry>,
    value: Option<&'a Node>,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Unsupported;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Unsupported> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        // A key's quotes are not kept: one YAML could read otherwise is
        // left to `serde-saphyr`.
        if entry.key == "<complex key>" || ambiguous(&entry.key) {
            return unsupported("a complex or ambiguous key");
        }
        self.value = Some(&entry.value);
        let key: de::value::StrDeserializer<'_, Unsupported> =
            entry.key.as_str().into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Unsupported> {
        match self.value.take() {
            Some(node) => seed.deserialize(NodeDe(node)),
            None => unsupported("a value without a key"),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}
