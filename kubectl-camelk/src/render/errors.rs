//! Errors for people: the report printed on stderr, the hints attached to
//! errors, and the marker of an error already printed.

/// An error already printed (for example as JSON); only the exit code is left.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reported")
    }
}

impl std::error::Error for Reported {}

/// Advice attached to an error as context; printed after it as `hint: ...`
/// instead of in the chain.
#[derive(Debug)]
pub struct Hint(pub String);

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An error for people: `error: outer: inner: ...`, then any hints. A cause
/// whose text is already shown is left out: most errors here (and libgit2's)
/// quote their source in their own message, so the plain chain would say
/// everything twice.
pub fn error_report(error: &anyhow::Error) -> String {
    let hint = error.downcast_ref::<Hint>().map(|Hint(hint)| hint.as_str());
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if Some(text.as_str()) == hint {
            continue;
        }
        if out.contains(text.trim()) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    match hint {
        Some(hint) => format!("error: {out}\nhint: {hint}"),
        None => format!("error: {out}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("revision `x` not found: {0}")]
    struct Quoting(#[source] std::io::Error);

    #[test]
    fn a_cause_the_message_already_quotes_is_said_once() {
        let inner = std::io::Error::other("revspec 'x' not found");
        let error = anyhow::Error::new(Quoting(inner)).context("planning the change");
        assert_eq!(
            error_report(&error),
            "error: planning the change: revision `x` not found: revspec 'x' not found"
        );
    }

    #[test]
    fn causes_the_message_does_not_quote_are_kept() {
        let error = anyhow::anyhow!("disk full").context("writing the manifest");
        assert_eq!(
            error_report(&error),
            "error: writing the manifest: disk full"
        );
    }

    #[test]
    fn a_hint_follows_the_error() {
        let error = anyhow::anyhow!("push rejected")
            .context("pushing")
            .context(Hint("push it later".into()));
        assert_eq!(
            error_report(&error),
            "error: pushing: push rejected\nhint: push it later"
        );
    }
}
