//! [`Step`]: one cumulative target of a rollout, a count or a percentage.

use std::borrow::Cow;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many of a rollout's moves are done by the end of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A number of resources.
    Count(u64),
    /// A percentage of the resources to move (validation keeps it ≤ 100).
    Percent(u64),
}

/// Why a text is not a step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The step is empty.
    #[error("empty rollout step: write a count such as `5` or a percentage such as `10%`")]
    Empty,
    /// The step is neither a count nor a percentage (the text given).
    #[error("rollout step `{0}` is neither a count (`5`) nor a percentage (`10%`)")]
    Invalid(String),
}

impl Step {
    /// Resources moved by the end of this step, out of `total`. Percentages
    /// round up so that a small non-zero share moves at least one resource.
    pub fn target(self, total: usize) -> usize {
        match self {
            Step::Count(n) => usize::try_from(n).unwrap_or(usize::MAX).min(total),
            Step::Percent(p) => {
                let p = p.min(100) as u128;
                ((total as u128 * p).div_ceil(100)) as usize
            }
        }
    }
}

impl std::str::FromStr for Step {
    type Err = StepError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(StepError::Empty);
        }
        let invalid = || StepError::Invalid(text.to_string());
        match trimmed.strip_suffix('%') {
            Some(number) => number
                .trim()
                .parse()
                .map(Step::Percent)
                .map_err(|_| invalid()),
            None => trimmed.parse().map(Step::Count).map_err(|_| invalid()),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Count(n) => write!(f, "{n}"),
            Step::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Step::Count(n) => serializer.serialize_u64(*n),
            Step::Percent(_) => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Step;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a count such as 5 or a percentage such as \"10%\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Step, E> {
                Ok(Step::Count(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Step, E> {
                u64::try_from(v)
                    .map(Step::Count)
                    .map_err(|_| E::custom(format!("rollout step {v} is negative")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Step, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Step, E> {
                Err(E::custom(StepError::Empty))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl JsonSchema for Step {
    fn schema_name() -> Cow<'static, str> {
        "Step".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "x-kubernetes-int-or-string": true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counts_and_percentages() {
        assert_eq!("10%".parse(), Ok(Step::Percent(10)));
        assert_eq!("5".parse(), Ok(Step::Count(5)));
        assert_eq!("".parse::<Step>(), Err(StepError::Empty));
        assert!(matches!("ten".parse::<Step>(), Err(StepError::Invalid(_))));
        assert!(matches!("-5".parse::<Step>(), Err(StepError::Invalid(_))));
    }

    #[test]
    fn targets_round_up() {
        assert_eq!(Step::Percent(10).target(7), 1);
        assert_eq!(Step::Percent(50).target(7), 4);
        assert_eq!(Step::Percent(100).target(7), 7);
        assert_eq!(Step::Percent(0).target(7), 0);
        assert_eq!(Step::Count(20).target(7), 7);
    }
}
