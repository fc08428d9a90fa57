//! Rendering for people and machines: aligned tables, Markdown for a pull
//! request comment, JSON; colour only on a terminal and never with NO_COLOR.

use std::io::IsTerminal;

use camelk_reconciler::plan::Plan;

use crate::cli::Output;

/// Whether stdout gets ANSI colours.
pub fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn paint(text: &str, code: &str, on: bool) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// A unified diff of the manifest, `a/` and `b/` as Git prints them.
pub fn manifest_diff(path: &str, old: &str, new: &str, colour: bool) -> String {
    let diff = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&prefixed("a", path), &prefixed("b", path))
        .to_string();
    if !colour {
        return diff;
    }
    diff.lines()
        .map(|line| match line.chars().next() {
            Some('+') if !line.starts_with("+++") => paint(line, "32", true),
            Some('-') if !line.starts_with("---") => paint(line, "31", true),
            Some('@') => paint(line, "36", true),
            _ => line.to_string(),
        })
        .map(|l| l + "\n")
        .collect()
}

/// `a/path` as Git writes it for a path in the repository; an absolute
/// path (a file outside any repository) stays as it is.
fn prefixed(side: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{side}/{path}")
    }
}

/// Columns padded to their widest cell, three spaces apart, as kubectl prints.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

pub fn summary(plan: &Plan) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{} in {}, {}, {} blocked, {}, {} unchanged, {} out of scope",
        plural(plan.move_count(), "move"),
        plural(plan.batches.len(), "batch").replace("batchs", "batches"),
        plural(plan.first_assignments.len(), "first assignment"),
        plan.blocked.len(),
        plural(plan.errors.len(), "error"),
        plan.unchanged.total,
        plan.unchanged.out_of_scope,
    )
}

struct Sections {
    moves: Vec<Vec<String>>,
    first: Vec<Vec<String>>,
    blocked: Vec<Vec<String>>,
    errors: Vec<Vec<String>>,
}

fn sections(plan: &Plan) -> Sections {
    Sections {
        moves: plan
            .batches
            .iter()
            .flat_map(|b| {
                b.moves.iter().map(move |m| {
                    vec![
                        b.step.to_string(),
                        m.resource.kind.to_string(),
                        m.resource.namespace.clone(),
                        m.resource.name.clone(),
                        m.from.to_string(),
                        m.to.to_string(),
                        m.because.to_string(),
                    ]
                })
            })
            .collect(),
        first: plan
            .first_assignments
            .iter()
            .map(|a| {
                vec![
                    a.resource.kind.to_string(),
                    a.resource.namespace.clone(),
                    a.resource.name.clone(),
                    a.to.to_string(),
                    a.because.to_string(),
                ]
            })
            .collect(),
        blocked: plan
            .blocked
            .iter()
            .map(|b| {
                vec![
                    b.change.resource.kind.to_string(),
                    b.change.resource.namespace.clone(),
                    b.change.resource.name.clone(),
                    b.change.from.to_string(),
                    b.change.to.to_string(),
                    b.why.to_string(),
                ]
            })
            .collect(),
        errors: plan
            .errors
            .iter()
            .map(|e| {
                vec![
                    e.resource.kind.to_string(),
                    e.resource.namespace.clone(),
                    e.resource.name.clone(),
                    e.message.clone(),
                ]
            })
            .collect(),
    }
}

const MOVE_HEADER: [&str; 7] = ["BATCH", "KIND", "NAMESPACE", "NAME", "FROM", "TO", "WHY"];
const FIRST_HEADER: [&str; 5] = ["KIND", "NAMESPACE", "NAME", "TO", "WHY"];
const BLOCKED_HEADER: [&str; 6] = ["KIND", "NAMESPACE", "NAME", "FROM", "TO", "BLOCKED BECAUSE"];
const ERROR_HEADER: [&str; 4] = ["KIND", "NAMESPACE", "NAME", "ERROR"];

pub fn plan_table(plan: &Plan, colour: bool) -> String {
    let s = sections(plan);
    let mut out = format!("{} {}\n", paint("Plan:", "1", colour), summary(plan));
    let mut section = |title: &str, header: &[&str], rows: &[Vec<String>]| {
        if !rows.is_empty() {
            out.push_str(&format!(
                "\n{}\n{}",
                paint(title, "1", colour),
                table(header, rows)
            ));
        }
    };
    section("Moves", &MOVE_HEADER, &s.moves);
    section("First assignments", &FIRST_HEADER, &s.first);
    section("Blocked now", &BLOCKED_HEADER, &s.blocked);
    section("Errors", &ERROR_HEADER, &s.errors);
    if !plan.notes.is_empty() {
        out.push_str(&format!("\n{}\n", paint("Notes", "1", colour)));
        for note in &plan.notes {
            out.push_str(&format!("- {note}\n"));
        }
    }
    out
}

pub fn plan_markdown(plan: &Plan) -> String {
    let s = sections(plan);
    let mut out = format!("### Planned migration\n\n{}\n", summary(plan));
    let mut section = |title: &str, header: &[&str], rows: &[Vec<String>]| {
        if !rows.is_empty() {
            out.push_str(&format!(
                "\n#### {title}\n\n{}",
                markdown_table(header, rows)
            ));
        }
    };
    section("Moves", &MOVE_HEADER, &s.moves);
    section("First assignments", &FIRST_HEADER, &s.first);
    section("Blocked now", &BLOCKED_HEADER, &s.blocked);
    section("Errors", &ERROR_HEADER, &s.errors);
    if !plan.notes.is_empty() {
        out.push_str("\n#### Notes\n\n");
        for note in &plan.notes {
            out.push_str(&format!("- {note}\n"));
        }
    }
    out
}

/// `value` as `-o json` (pretty, one trailing newline) or `-o yaml`.
pub fn structured<T: serde::Serialize>(value: &T, output: Output) -> String {
    match output {
        Output::Yaml => serde_saphyr::to_string(value).expect("plain data serializes to YAML"),
        _ => serde_json::to_string_pretty(value).expect("plain data serializes to JSON") + "\n",
    }
}

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
