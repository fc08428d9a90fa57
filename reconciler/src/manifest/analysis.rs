//! The pure half of a step's metric analysis (`healthGate.analysis`): the
//! success conditions, the placeholders of a query, and how a measurement
//! moves the analysis on. Reading Prometheus is the sync's
//! (`crate::sync::analysis`).
//!
//! Rules:
//! - A measurement runs every query once. One that cannot be read (an
//!   error, or no sample at all) makes the whole measurement an error:
//!   errors in a row are bounded by `consecutiveErrorLimit`, and do not
//!   count as measurements.
//! - Otherwise the measurement counts; it fails if any sample of any query
//!   fails its condition. Failures are bounded by `failureLimit`.
//! - The analysis passes once `count` measurements are taken within both
//!   bounds, and fails as soon as one bound is passed.

use std::fmt;

use crate::api::{Analysis, AnalysisStatus};

/// A success condition: `result <op> <number>`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Condition {
    op: Op,
    bound: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    const ALL: [(&'static str, Op); 6] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];

    fn text(self) -> &'static str {
        Op::ALL
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("?", |(text, _)| text)
    }
}

/// Why a success condition does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "success condition `{0}` is not `result <op> <number>` (op one of <, <=, >, >=, ==, !=), as in `result < 0.05`"
)]
pub(crate) struct ConditionError(String);

impl Condition {
    pub(crate) fn parse(text: &str) -> Result<Condition, ConditionError> {
        let invalid = || ConditionError(text.to_string());
        let rest = text
            .trim()
            .strip_prefix("result")
            .ok_or_else(invalid)?
            .trim_start();
        let (op, number) = Op::ALL
            .iter()
            .find_map(|(t, op)| rest.strip_prefix(t).map(|n| (*op, n)))
            .ok_or_else(invalid)?;
        let bound: f64 = number.trim().parse().map_err(|_| invalid())?;
        if !bound.is_finite() {
            return Err(invalid());
        }
        Ok(Condition { op, bound })
    }

    /// Whether `value` satisfies the condition (NaN satisfies none).
    pub(crate) fn holds(self, value: f64) -> bool {
        match self.op {
            Op::Lt => value < self.bound,
            Op::Le => value <= self.bound,
            Op::Gt => value > self.bound,
            Op::Ge => value >= self.bound,
            Op::Eq => value == self.bound,
            Op::Ne => !value.is_nan() && value != self.bound,
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "result {} {}", self.op.text(), self.bound)
    }
}

/// What a step moved, for a query's placeholders.
#[derive(Clone, Debug, Default)]
pub(crate) struct Moved {
    pub(crate) names: Vec<String>,
    pub(crate) namespaces: Vec<String>,
    pub(crate) operators: Vec<String>,
}

/// `query` with `{{names}}`, `{{namespaces}}` and `{{operators}}` replaced
/// by regular expression alternations of `moved`'s (sorted, each once, dots
/// escaped for PromQL's double-quoted strings).
pub(crate) fn expand(query: &str, moved: &Moved) -> String {
    let alternation = |items: &[String]| {
        let mut items: Vec<String> = items.iter().map(|i| i.replace('.', "\\\\.")).collect();
        items.sort();
        items.dedup();
        items.join("|")
    };
    query
        .replace("{{names}}", &alternation(&moved.names))
        .replace("{{namespaces}}", &alternation(&moved.namespaces))
        .replace("{{operators}}", &alternation(&moved.operators))
}

/// One query's answer in a measurement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reading {
    /// The query's name.
    pub(crate) name: String,
    /// Its samples, each with the labels that tell it apart, or why it
    /// could not be read.
    pub(crate) samples: Result<Vec<(String, f64)>, String>,
}

/// How the analysis stands after a measurement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// More measurements to take.
    Running,
    /// `count` measurements taken within the limits.
    Passed,
    /// A limit passed; why, naming the queries and their values.
    Failed(String),
}

/// Records one measurement of `readings` (each judged by its query's
/// condition, in the order of `analysis.queries`) on `status`; how the
/// analysis then stands.
pub(crate) fn record(
    analysis: &Analysis,
    status: &mut AnalysisStatus,
    readings: &[Reading],
    at: String,
) -> Standing {
    status.last_measured_at = Some(at);
    status.last = readings.iter().map(describe).collect();
    let errors: Vec<&Reading> = readings
        .iter()
        .filter(|r| match &r.samples {
            Err(_) => true,
            Ok(samples) => samples.is_empty(),
        })
        .collect();
    if !errors.is_empty() {
        status.consecutive_errors += 1;
        if status.consecutive_errors > analysis.consecutive_error_limit {
            let said: Vec<String> = errors.iter().map(|r| describe(r)).collect();
            return Standing::Failed(format!(
                "{} measurements in a row ended in an error (limit {}): {}",
                status.consecutive_errors,
                analysis.consecutive_error_limit,
                said.join("; ")
            ));
        }
        return Standing::Running;
    }
    status.consecutive_errors = 0;
    status.measurements += 1;
    let failed: Vec<String> = readings
        .iter()
        .zip(&analysis.queries)
        .filter_map(|(reading, query)| {
            let condition = Condition::parse(&query.success_condition).ok()?;
            let samples = reading.samples.as_ref().ok()?;
            samples.iter().any(|(_, v)| !condition.holds(*v)).then(|| {
                format!(
                    "query {} ({condition}) gave {}",
                    query.name,
                    values(samples)
                )
            })
        })
        .collect();
    if !failed.is_empty() {
        status.failures += 1;
        if status.failures > analysis.failure_limit {
            return Standing::Failed(format!(
                "{} of {} measurements failed (limit {}): {}",
                status.failures,
                status.measurements,
                analysis.failure_limit,
                failed.join("; ")
            ));
        }
    }
    if status.measurements >= analysis.count {
        Standing::Passed
    } else {
        Standing::Running
    }
}

fn values(samples: &[(String, f64)]) -> String {
    let shown: Vec<String> = samples
        .iter()
        .take(10)
        .map(|(labels, v)| {
            if labels.is_empty() {
                v.to_string()
            } else {
                format!("{v} {labels}")
            }
        })
        .collect();
    shown.join(", ")
}

fn describe(reading: &Reading) -> String {
    match &reading.samples {
        Ok(samples) if samples.is_empty() => format!("{}: no data", reading.name),
        Ok(samples) => format!("{}: {}", reading.name, values(samples)),
        Err(why) => format!("{}: {why}", reading.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AnalysisQuery;

    fn analysis(count: u32, failure_limit: u32, error_limit: u32) -> Analysis {
        Analysis {
            prometheus: "http://p:9090".into(),
            interval: "1s".into(),
            count,
            failure_limit,
            consecutive_error_limit: error_limit,
            queries: vec![AnalysisQuery {
                name: "errors".into(),
                query: "q".into(),
                success_condition: "result < 0.1".into(),
            }],
        }
    }

    fn reading(values: &[f64]) -> Vec<Reading> {
        vec![Reading {
            name: "errors".into(),
            samples: Ok(values
                .iter()
                .map(|v| ("{integration=\"a\"}".to_string(), *v))
                .collect()),
        }]
    }

    fn error(why: &str) -> Vec<Reading> {
        vec![Reading {
            name: "errors".into(),
            samples: Err(why.into()),
        }]
    }

    #[test]
    fn conditions_parse_and_hold() {
        let c = Condition::parse("result < 0.05").unwrap();
        assert!(c.holds(0.01) && !c.holds(0.05) && !c.holds(f64::NAN));
        assert!(Condition::parse(" result>=1 ").unwrap().holds(1.0));
        assert!(Condition::parse("result != 0").unwrap().holds(2.0));
        assert!(!Condition::parse("result != 0").unwrap().holds(f64::NAN));
        assert_eq!(
            Condition::parse("result <= 3").unwrap().to_string(),
            "result <= 3"
        );
        for bad in [
            "x < 1",
            "result ~ 1",
            "result < many",
            "result < inf",
            "< 1",
        ] {
            assert!(Condition::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn placeholders_become_sorted_escaped_alternations() {
        let moved = Moved {
            names: vec!["b".into(), "a.v2".into(), "b".into()],
            namespaces: vec!["shop".into()],
            operators: vec!["operator-2".into()],
        };
        assert_eq!(
            expand(
                "x{integration=~\"{{names}}\",namespace=~\"{{namespaces}}\",op=\"{{operators}}\"}",
                &moved
            ),
            "x{integration=~\"a\\\\.v2|b\",namespace=~\"shop\",op=\"operator-2\"}"
        );
    }

    #[test]
    fn count_good_measurements_pass() {
        let a = analysis(3, 0, 2);
        let mut st = AnalysisStatus::default();
        for i in 1..=3 {
            let standing = record(&a, &mut st, &reading(&[0.0, 0.05]), format!("t{i}"));
            assert_eq!(
                standing,
                if i < 3 {
                    Standing::Running
                } else {
                    Standing::Passed
                }
            );
        }
        assert_eq!((st.measurements, st.failures), (3, 0));
        assert_eq!(st.last_measured_at.as_deref(), Some("t3"));
    }

    #[test]
    fn failures_beyond_the_limit_fail_and_name_the_query_and_values() {
        let a = analysis(5, 1, 2);
        let mut st = AnalysisStatus::default();
        assert_eq!(
            record(&a, &mut st, &reading(&[0.5]), "t".into()),
            Standing::Running
        );
        let Standing::Failed(why) = record(&a, &mut st, &reading(&[0.0, 0.7]), "t".into()) else {
            panic!("a second failure passes the limit of 1");
        };
        assert!(
            why.contains("2 of 2 measurements failed (limit 1)")
                && why.contains("query errors (result < 0.1) gave 0 {integration=\"a\"}, 0.7"),
            "{why}"
        );
    }

    #[test]
    fn errors_in_a_row_are_bounded_and_a_good_reading_resets_them() {
        let a = analysis(2, 0, 1);
        let mut st = AnalysisStatus::default();
        assert_eq!(
            record(&a, &mut st, &error("connection refused"), "t".into()),
            Standing::Running
        );
        assert_eq!(
            record(&a, &mut st, &reading(&[0.0]), "t".into()),
            Standing::Running
        );
        assert_eq!(st.consecutive_errors, 0);
        assert_eq!(
            record(&a, &mut st, &reading(&[]), "t".into()),
            Standing::Running,
            "no data is an error"
        );
        let Standing::Failed(why) = record(&a, &mut st, &error("connection refused"), "t".into())
        else {
            panic!("a second error in a row passes the limit of 1");
        };
        assert!(
            why.contains(
                "2 measurements in a row ended in an error (limit 1): errors: connection refused"
            ),
            "{why}"
        );
        assert_eq!(st.measurements, 1, "errors are not measurements");
    }
}
