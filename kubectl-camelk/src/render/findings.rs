//! The findings of `kubectl camelk check` and their report.

use anstyle::AnsiColor;

use super::colour::{ADDED, HEADING, REMOVED, paint};

/// How one check of `kubectl camelk check` came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    /// Worth knowing, not a failure (the exit code stays 0).
    Warn,
    Fail,
}

/// One finding of `kubectl camelk check`: the part of the installation it
/// is about, how it came out, and for a failure the command that fixes it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub part: String,
    pub verdict: Verdict,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    pub fn pass(part: &str, message: impl Into<String>) -> Self {
        Self::new(part, Verdict::Pass, message, None)
    }

    pub fn warn(part: &str, message: impl Into<String>) -> Self {
        Self::new(part, Verdict::Warn, message, None)
    }

    /// The same finding with the command (or step) that fixes it.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    pub fn fail(part: &str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(part, Verdict::Fail, message, Some(fix.into()))
    }

    fn new(part: &str, verdict: Verdict, message: impl Into<String>, fix: Option<String>) -> Self {
        Finding {
            part: part.into(),
            verdict,
            message: message.into(),
            fix,
        }
    }
}

/// The findings of `check` as `flux check` prints them: a heading per part,
/// `✔`, `!` or `✗` per finding, the fix under a failure, and a last line
/// that counts the failures (styled: print it with
/// [`print_styled`](super::print_styled)).
pub fn check_report(findings: &[Finding]) -> String {
    let mut out = String::new();
    let mut part = None;
    for f in findings {
        if part != Some(&f.part) {
            out.push_str(&paint(&format!("► {}", f.part), HEADING));
            out.push('\n');
            part = Some(&f.part);
        }
        let (mark, style) = match f.verdict {
            Verdict::Pass => ("✔", ADDED),
            Verdict::Warn => ("!", AnsiColor::Yellow.on_default()),
            Verdict::Fail => ("✗", REMOVED),
        };
        out.push_str(&format!("{} {}\n", paint(mark, style), f.message));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("  fix: {fix}\n"));
        }
    }
    let failed = findings
        .iter()
        .filter(|f| f.verdict == Verdict::Fail)
        .count();
    match failed {
        0 => out.push_str(&paint("✔ all checks passed", ADDED)),
        1 => out.push_str(&paint("✗ 1 check failed", REMOVED)),
        n => out.push_str(&paint(&format!("✗ {n} checks failed"), REMOVED)),
    }
    out.push('\n');
    out
}
