//! [`Diagnostic`]: one problem found in a manifest, with its place in the
//! file and a message a person can act on.

use std::fmt;

use super::tree::Location;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The manifest cannot be used.
    Error,
    /// The manifest can be used, but probably does not say what was meant.
    Warning,
}

/// One problem found in a manifest, at a position of its file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// Whether it stops the manifest from being used.
    pub severity: Severity,
    /// The file as the user named it.
    pub file: String,
    /// Where in the file.
    #[serde(flatten)]
    pub at: Location,
    /// What is wrong, for people.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{}:{}: {severity}: {}", self.file, self.at, self.message)
    }
}

/// Closest of `candidates` to a misspelt `word`, when one is close enough to
/// be a likely typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::jaro_winkler(&word.to_ascii_lowercase(), &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        // On a tie the earlier candidate (declaration order) wins.
        .fold(None, |best: Option<(f64, &str)>, (score, c)| match best {
            Some((top, _)) if top >= score => best,
            _ => Some((score, c)),
        })
        .map(|(_, c)| c)
}

/// `"; did you mean `x`?"` or nothing.
pub(crate) fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(word, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        assert_eq!(
            did_you_mean("operatr", ["operator", "operators", "kind"]),
            Some("operator")
        );
        assert_eq!(
            did_you_mean("defaultOperater", ["defaultOperator", "rules"]),
            Some("defaultOperator")
        );
        assert_eq!(did_you_mean("zzz", ["operator", "kind"]), None);
    }
}
