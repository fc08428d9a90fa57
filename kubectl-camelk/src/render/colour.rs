//! Colour: text for people is styled with `anstyle` whatever the output,
//! and written through [`stdout`], an `anstream` stream that keeps the
//! styles only on a terminal and never with NO_COLOR ([`colour_choice`]);
//! elsewhere it strips them, so a pipe or a file gets plain text.

use std::ffi::OsStr;
use std::io::{IsTerminal, Write};

use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Style};

/// Section headings (the plan table, the check report).
pub(super) const HEADING: Style = Style::new().bold();
/// Lines of a unified diff; also the marks of passed and failed checks.
pub(super) const ADDED: Style = AnsiColor::Green.on_default();
pub(super) const REMOVED: Style = AnsiColor::Red.on_default();
pub(super) const HUNK: Style = AnsiColor::Cyan.on_default();

/// Whether stdout keeps its colours: on a terminal, unless NO_COLOR is set
/// to something (<https://no-color.org>: an empty value does not count).
/// Decided here, not by `anstream`'s own detection, which also reads
/// CLICOLOR, CLICOLOR_FORCE and TERM: the plugin has always followed
/// NO_COLOR and the terminal alone.
fn colour_choice() -> ColorChoice {
    choose(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

fn choose(terminal: bool, no_color: Option<&OsStr>) -> ColorChoice {
    if terminal && no_color.is_none_or(OsStr::is_empty) {
        ColorChoice::Always
    } else {
        ColorChoice::Never
    }
}

/// Stdout for styled text: styles kept or stripped by [`colour_choice`].
fn stdout() -> AutoStream<std::io::Stdout> {
    AutoStream::new(std::io::stdout(), colour_choice())
}

/// Prints styled `text` on [`stdout`], as `print!` does (a failed write
/// panics, as there).
pub fn print_styled(text: &str) {
    let mut out = stdout();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .expect("failed printing to stdout");
}

pub(super) fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// Styled text as a terminal gets it, and as a pipe gets it.
#[cfg(test)]
pub(super) fn both_ways(styled: &str) -> (String, String) {
    let through = |choice| {
        let mut out = AutoStream::new(Vec::new(), choice);
        out.write_all(styled.as_bytes()).unwrap();
        String::from_utf8(out.into_inner()).unwrap()
    };
    (through(ColorChoice::Always), through(ColorChoice::Never))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert_eq!(choose(true, None), ColorChoice::Always);
        // An empty NO_COLOR does not count (no-color.org).
        assert_eq!(choose(true, Some(OsStr::new(""))), ColorChoice::Always);
        assert_eq!(choose(true, Some(OsStr::new("1"))), ColorChoice::Never);
        assert_eq!(choose(false, None), ColorChoice::Never);
        assert_eq!(choose(false, Some(OsStr::new(""))), ColorChoice::Never);
    }
}
