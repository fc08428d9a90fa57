//! Rendering for people and machines: aligned tables, Markdown for a pull
//! request comment, JSON, annotations for CI (GitHub workflow commands,
//! GitLab Code Quality), the progress line of `move --wait`, and error
//! reports.
//!
//! Colour: text for people is styled with `anstyle` whatever the output,
//! and written through [`stdout`], an `anstream` stream that keeps the
//! styles only on a terminal and never with NO_COLOR ([`colour_choice`]);
//! elsewhere it strips them, so a pipe or a file gets plain text.
//!
//! Layer: below `commands`, above `cli` (whose types it reads).

use std::ffi::OsStr;
use std::io::{IsTerminal, Write};

use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Style};
use camelk_reconciler::handoff::executor::Progress;
use camelk_reconciler::manifest::{Diagnostic, Severity};
use camelk_reconciler::plan::Plan;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::Output;

/// Section headings of the plan table.
const HEADING: Style = Style::new().bold();
/// Lines of a unified diff.
const ADDED: Style = AnsiColor::Green.on_default();
const REMOVED: Style = AnsiColor::Red.on_default();
const HUNK: Style = AnsiColor::Cyan.on_default();

/// Whether stdout keeps its colours: on a terminal, unless NO_COLOR is set
/// to something (<https://no-color.org>: an empty value does not count).
/// Decided here, not by `anstream`'s own detection, which also reads
/// CLICOLOR, CLICOLOR_FORCE and TERM: the plugin has always followed
/// NO_COLOR and the terminal alone.
pub fn colour_choice() -> ColorChoice {
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
pub fn stdout() -> AutoStream<std::io::Stdout> {
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

fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// A unified diff of the manifest, `a/` and `b/` as Git prints them, added
/// lines green, removed ones red, hunk headers cyan (styled: print it with
/// [`print_styled`]).
pub fn manifest_diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&prefixed("a", path), &prefixed("b", path))
        .to_string();
    diff.split_inclusive('\n')
        .map(|line| {
            // Styled up to the line break, so the stripped text is the diff
            // byte for byte.
            let (text, end) = line.split_at(line.trim_end_matches('\n').len());
            let style = match text.chars().next() {
                Some('+') if !text.starts_with("+++") => ADDED,
                Some('-') if !text.starts_with("---") => REMOVED,
                Some('@') => HUNK,
                _ => return line.to_string(),
            };
            paint(text, style) + end
        })
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

/// How long ago, as kubectl prints ages: `45s`, `2m30s`, `17m`, `5h10m`, `30h`, `3d4h`, `40d`, `3y`.
pub fn age(seconds: u64) -> String {
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    let pair = |big: u64, big_unit: &str, small: u64, small_unit: &str| match small {
        0 => format!("{big}{big_unit}"),
        _ => format!("{big}{big_unit}{small}{small_unit}"),
    };
    match () {
        _ if seconds < 120 => format!("{seconds}s"),
        _ if minutes < 10 => pair(minutes, "m", seconds % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => pair(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 192 => pair(days, "d", hours % 24, "h"),
        _ if days < 365 * 2 => format!("{days}d"),
        _ => format!("{}y", days / 365),
    }
}

/// One row as [`table`] would align it under `header`, without the header:
/// what a watch prints under the table it printed first.
pub fn table_row(header: &[&str], row: Vec<String>) -> String {
    let rows = table(header, &[row]);
    rows.lines()
        .nth(1)
        .map(|l| format!("{l}\n"))
        .unwrap_or_default()
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

/// What `kubectl camelk status` shows of one OperatorAssignment: revisions,
/// generation, the rollout, owners, conditions and recent migrations.
pub fn assignment_status(a: &camelk_reconciler::api::OperatorAssignment) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let st = a.status.clone().unwrap_or_default();
    let short = |r: &Option<String>| {
        r.as_deref()
            .map(|r| camelk_reconciler::source::short_sha(r).to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let _ = writeln!(
        out,
        "Name:              {}/{}",
        a.metadata.namespace.as_deref().unwrap_or_default(),
        a.metadata.name.as_deref().unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "Applied revision:  {}",
        short(&st.last_applied_revision)
    );
    let _ = writeln!(
        out,
        "Attempted:         {}",
        short(&st.last_attempted_revision)
    );
    let _ = writeln!(
        out,
        "Generation:        {} (observed {})",
        a.metadata.generation.unwrap_or_default(),
        st.observed_generation
            .filter(|g| *g != camelk_reconciler::api::NOT_OBSERVED)
            .map_or("<none>".to_string(), |g| g.to_string())
    );
    if let Some(r) = &st.rollout {
        let _ = writeln!(
            out,
            "Rollout:           {} step {}/{} (completed {}){}",
            r.state,
            r.current_step,
            r.total_steps,
            r.completed_steps,
            if r.message.is_empty() {
                String::new()
            } else {
                format!(": {}", r.message)
            }
        );
        for f in &r.failing {
            let _ = writeln!(out, "  failing:         {f}");
        }
    }
    if !st.counts.is_empty() {
        let owners: Vec<String> = st
            .counts
            .iter()
            .map(|(id, n)| format!("{id}={n}"))
            .collect();
        let _ = writeln!(out, "Owners:            {}", owners.join(", "));
    }
    let mut table = vec![vec![
        "CONDITION".to_string(),
        "STATUS".into(),
        "REASON".into(),
        "MESSAGE".into(),
    ]];
    for c in &st.conditions {
        table.push(vec![
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        ]);
    }
    out.push('\n');
    out.push_str(&rows_table(&table));
    if !st.history.is_empty() {
        out.push('\n');
        let mut table = vec![vec![
            "REVISION".to_string(),
            "STARTED".into(),
            "MOVES".into(),
            "STEPS".into(),
            "RESULT".into(),
        ]];
        for h in &st.history {
            table.push(vec![
                camelk_reconciler::source::short_sha(&h.revision).to_string(),
                h.started_at.clone(),
                h.moves.to_string(),
                h.steps.to_string(),
                h.result.to_string(),
            ]);
        }
        out.push_str(&rows_table(&table));
    }
    out.push('\n');
    out
}

/// A table whose first row is its header.
pub fn rows_table(rows: &[Vec<String>]) -> String {
    let header: Vec<&str> = rows[0].iter().map(String::as_str).collect();
    table(&header, &rows[1..])
}

pub fn summary(plan: &Plan) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let conflicts = match plan.conflicts.len() {
        0 => String::new(),
        n => format!(", {}", plural(n, "owner-key conflict")),
    };
    format!(
        "{} in {}, {}, {} blocked, {}{conflicts}, {} unchanged, {} out of scope",
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
    conflicts: Vec<Vec<String>>,
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
        conflicts: plan
            .conflicts
            .iter()
            .map(|c| {
                vec![
                    c.resource.kind.to_string(),
                    c.resource.namespace.clone(),
                    c.resource.name.clone(),
                    c.label.clone(),
                    c.annotation.clone(),
                    c.applier.clone().unwrap_or_else(|| "-".into()),
                    if c.mended {
                        format!("the label is set to {}", c.annotation)
                    } else {
                        "reported, left as it is (docs/gitops-tools.md)".into()
                    },
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
/// Label and annotation that disagree: the annotation owns (upstream obeys it).
const CONFLICT_HEADER: [&str; 7] = [
    "KIND",
    "NAMESPACE",
    "NAME",
    "LABEL",
    "ANNOTATION (OWNER)",
    "KEYS APPLIED BY",
    "SYNC",
];
const CONFLICT_TITLE: &str = "Owner keys that disagree";

/// The plan for people, section headings in bold (styled: print it with
/// [`print_styled`]).
pub fn plan_table(plan: &Plan) -> String {
    let s = sections(plan);
    let mut out = format!("{} {}\n", paint("Plan:", HEADING), summary(plan));
    let mut section = |title: &str, header: &[&str], rows: &[Vec<String>]| {
        if !rows.is_empty() {
            out.push_str(&format!(
                "\n{}\n{}",
                paint(title, HEADING),
                table(header, rows)
            ));
        }
    };
    section("Moves", &MOVE_HEADER, &s.moves);
    section("First assignments", &FIRST_HEADER, &s.first);
    section("Blocked now", &BLOCKED_HEADER, &s.blocked);
    section(CONFLICT_TITLE, &CONFLICT_HEADER, &s.conflicts);
    section("Errors", &ERROR_HEADER, &s.errors);
    if !plan.notes.is_empty() {
        out.push_str(&format!("\n{}\n", paint("Notes", HEADING)));
        for note in &plan.notes {
            out.push_str(&format!("- {note}\n"));
        }
    }
    out
}

/// The Markdown of a pull-request comment, with no marker and no limit.
pub fn plan_markdown(plan: &Plan) -> String {
    plan_comment(plan, &Comment::default()).expect("without a limit everything fits")
}

/// How `plan -o markdown` shapes its pull-request comment.
#[derive(Debug, Default)]
pub struct Comment<'a> {
    /// The assignment named in a hidden first line (an HTML comment), by
    /// which a bot finds the comment it wrote before and edits it instead
    /// of adding one per push.
    pub marker: Option<&'a str>,
    /// The most bytes the comment may take (GitHub refuses comments over
    /// 65536 characters); rows past it are left out, and said so.
    pub max_bytes: Option<usize>,
    /// The command that prints every row, named in the note that ends a cut
    /// comment (default `kubectl camelk plan -o json`).
    pub see_all: Option<&'a str>,
}

/// A section with more rows than this is folded in a `<details>` block.
pub const FOLD_AFTER: usize = 20;

/// The hidden first line of `plan -o markdown` for the assignment `name`.
pub fn plan_marker(name: &str) -> String {
    // An object name ends with a letter or digit, so it cannot close the
    // comment early.
    format!("<!-- kubectl-camelk:plan {name} -->")
}

/// `--max-bytes` is smaller than the heading and the note about what was
/// left out; holds the bytes those take.
#[derive(Debug, PartialEq, Eq)]
pub struct TooSmall(pub usize);

/// One titled part of the comment: a table (or the list of notes), its rows
/// already in Markdown, one line each.
struct Part {
    title: &'static str,
    header: Option<&'static [&'static str]>,
    /// What its rows are, singular and plural, for `<summary>` and the note.
    noun: (&'static str, &'static str),
    rows: Vec<String>,
}

/// The plan as a Markdown comment: the marker, the summary, a table per
/// section (folded when long), then the notes. With a byte limit, rows are
/// kept in order while they fit; the rest are counted in a last line that
/// says how to see them all.
pub fn plan_comment(plan: &Plan, comment: &Comment) -> Result<String, TooSmall> {
    let s = sections(plan);
    let table_rows = |rows: Vec<Vec<String>>| -> Vec<String> {
        rows.iter()
            .map(|row| {
                let cells: Vec<String> = row.iter().map(|c| markdown_cell(c)).collect();
                format!("| {} |\n", cells.join(" | "))
            })
            .collect()
    };
    let parts = [
        Part {
            title: "Moves",
            header: Some(&MOVE_HEADER),
            noun: ("move", "moves"),
            rows: table_rows(s.moves),
        },
        Part {
            title: "First assignments",
            header: Some(&FIRST_HEADER),
            noun: ("first assignment", "first assignments"),
            rows: table_rows(s.first),
        },
        Part {
            title: "Blocked now",
            header: Some(&BLOCKED_HEADER),
            noun: ("blocked move", "blocked moves"),
            rows: table_rows(s.blocked),
        },
        Part {
            title: CONFLICT_TITLE,
            header: Some(&CONFLICT_HEADER),
            noun: ("owner-key conflict", "owner-key conflicts"),
            rows: table_rows(s.conflicts),
        },
        Part {
            title: "Errors",
            header: Some(&ERROR_HEADER),
            noun: ("error", "errors"),
            rows: table_rows(s.errors),
        },
        Part {
            title: "Notes",
            header: None,
            noun: ("note", "notes"),
            rows: plan
                .notes
                .iter()
                .map(|n| format!("- {}\n", n.replace('\n', " ")))
                .collect(),
        },
    ];
    let mut head = String::new();
    if let Some(name) = comment.marker {
        head.push_str(&plan_marker(name));
        head.push('\n');
    }
    head.push_str(&format!("### Planned migration\n\n{}\n", summary(plan)));
    let total: usize = parts.iter().map(|p| p.rows.len()).sum();
    let see_all = comment.see_all.unwrap_or("kubectl camelk plan -o json");
    let render = |shown: usize| assemble(&head, &parts, shown, comment.max_bytes, see_all);

    let full = render(total);
    let Some(max) = comment.max_bytes.filter(|max| full.len() > *max) else {
        return Ok(full);
    };
    let least = render(0);
    if least.len() > max {
        return Err(TooSmall(least.len()));
    }
    // The most rows that fit: the length grows with the rows shown (a row
    // adds more than the note loses, but for the odd tiny note), so a binary
    // search finds it; only a measured count is kept, so what is printed
    // fits whatever the rows are.
    let (mut fits, mut over) = (0, total);
    while over - fits > 1 {
        let mid = fits + (over - fits) / 2;
        if render(mid).len() <= max {
            fits = mid;
        } else {
            over = mid;
        }
    }
    Ok(render(fits))
}

/// The comment with the first `shown` rows (in section order).
fn assemble(
    head: &str,
    parts: &[Part],
    shown: usize,
    max_bytes: Option<usize>,
    see_all: &str,
) -> String {
    let plural =
        |n: usize, (one, many): (&str, &str)| format!("{n} {}", if n == 1 { one } else { many });
    let mut out = head.to_string();
    let mut left = shown;
    let mut omitted = Vec::new();
    let mut omitted_total = 0;
    for part in parts {
        let take = part.rows.len().min(left);
        left -= take;
        if take < part.rows.len() {
            omitted.push(plural(part.rows.len() - take, part.noun));
            omitted_total += part.rows.len() - take;
        }
        if take == 0 {
            continue;
        }
        out.push_str(&format!("\n#### {}\n\n", part.title));
        let fold = part.rows.len() > FOLD_AFTER;
        if fold {
            out.push_str(&format!(
                "<details><summary>{}</summary>\n\n",
                plural(part.rows.len(), part.noun)
            ));
        }
        if let Some(header) = part.header {
            out.push_str(&format!(
                "| {} |\n|{}\n",
                header.join(" | "),
                "---|".repeat(header.len())
            ));
        }
        for row in &part.rows[..take] {
            out.push_str(row);
        }
        if fold {
            out.push_str("\n</details>\n");
        }
    }
    if omitted_total > 0 {
        let limit = max_bytes.map_or(String::new(), |max| format!(" to stay within {max} bytes"));
        out.push_str(&format!(
            "\n**{} left out**{limit} ({}): `{see_all}` shows them all.\n",
            plural(omitted_total, ("row", "rows")),
            omitted.join(", "),
        ));
    }
    out
}

/// A table cell: a `|` would end it and a line break would end the row.
fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

/// GitHub Actions workflow commands, one per diagnostic
/// (`::error file=F,line=L,col=C::message`): the runner shows each as an
/// annotation on that line of the pull request's diff.
pub fn github_annotations(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| {
            format!(
                "::{} file={},line={},col={}::{}\n",
                match d.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                },
                github_property(&d.file),
                d.at.line,
                d.at.column,
                github_data(&d.message),
            )
        })
        .collect()
}

/// A workflow command's message, escaped as the runner unescapes it.
fn github_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`, which would end it.
fn github_property(text: &str) -> String {
    github_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// A GitLab Code Quality report (a subset of Code Climate's format): a JSON
/// array, one issue per diagnostic, each with a fingerprint that stays the
/// same from one pipeline to the next while the finding does, so GitLab can
/// tell new findings from fixed ones.
pub fn gitlab_code_quality(diagnostics: &[Diagnostic]) -> String {
    let mut seen = std::collections::HashSet::new();
    let issues: Vec<serde_json::Value> = diagnostics
        .iter()
        .map(|d| {
            let mut fingerprint = code_quality_fingerprint(d, 0);
            // Fingerprints must be unique in a report: the same message twice
            // at the same place gets its occurrence hashed in.
            let mut occurrence = 0;
            while !seen.insert(fingerprint.clone()) {
                occurrence += 1;
                fingerprint = code_quality_fingerprint(d, occurrence);
            }
            serde_json::json!({
                "description": d.message,
                "check_name": "kubectl-camelk-validate",
                "fingerprint": fingerprint,
                "severity": match d.severity {
                    Severity::Error => "major",
                    Severity::Warning => "minor",
                },
                "location": { "path": d.file, "lines": { "begin": d.at.line } },
            })
        })
        .collect();
    serde_json::to_string_pretty(&issues).expect("plain data serializes to JSON") + "\n"
}

/// SHA-256 of the path, line, column and message (NUL-separated), in hex.
fn code_quality_fingerprint(d: &Diagnostic, occurrence: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(d.file.as_bytes());
    hash.update(format!("\0{}\0{}\0", d.at.line, d.at.column).as_bytes());
    hash.update(d.message.as_bytes());
    if occurrence > 0 {
        hash.update(format!("\0{occurrence}").as_bytes());
    }
    hex::encode(hash.finalize())
}

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
/// that counts the failures (styled: print it with [`print_styled`]).
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

/// `value` as `-o json` (pretty, one trailing newline) or `-o yaml`.
pub fn structured<T: serde::Serialize>(value: &T, output: Output) -> String {
    match output {
        Output::Yaml => serde_saphyr::to_string(value).expect("plain data serializes to YAML"),
        _ => serde_json::to_string_pretty(value).expect("plain data serializes to JSON") + "\n",
    }
}

/// The line `move --wait` keeps up to date while a handoff runs:
/// `  DONE/TOTAL moved, waiting on RESOURCE`. On a terminal it is one
/// `indicatif` line redrawn in place (padded to the terminal's width, so
/// what is printed after it starts on the next line); elsewhere (a log, a
/// pipe) indicatif draws nothing and each new state is a line of its own
/// on stderr.
pub struct HandoffProgress {
    /// The whole line is its message: one update, one redraw, never a
    /// mix of an old count and a new one.
    bar: ProgressBar,
    last: String,
}

impl HandoffProgress {
    pub fn on_stderr() -> Self {
        Self::to(ProgressDrawTarget::stderr())
    }

    fn to(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(None, target)
            .with_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
        Self {
            bar,
            last: String::new(),
        }
    }

    /// Shows `progress` when it differs from what is shown.
    pub fn show(&mut self, progress: &Progress) {
        let line = format!(
            "  {}/{} moved{}",
            progress.done,
            progress.total,
            progress
                .waiting_on
                .as_ref()
                .map(|w| format!(", waiting on {w}"))
                .unwrap_or_default()
        );
        if line == self.last {
            return;
        }
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.set_message(line.clone());
        }
        self.last = line;
    }

    /// Leaves the last state on screen.
    pub fn finish(self) {
        if !self.last.is_empty() {
            self.bar.finish();
        }
    }
}

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

    fn diagnostic(file: &str, message: &str) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            file: file.into(),
            at: camelk_reconciler::manifest::Location { line: 3, column: 5 },
            message: message.into(),
        }
    }

    #[test]
    fn workflow_commands_are_escaped_as_github_unescapes_them() {
        assert_eq!(
            github_annotations(&[diagnostic("a:b,c%.yaml", "50% off\r\nnext: line, more")]),
            "::error file=a%3Ab%2Cc%25.yaml,line=3,col=5::50%25 off%0D%0Anext: line, more\n"
        );
    }

    #[test]
    fn the_same_finding_twice_gets_two_fingerprints() {
        let twice = [diagnostic("f.yaml", "bad"), diagnostic("f.yaml", "bad")];
        let report: Vec<serde_json::Value> =
            serde_json::from_str(&gitlab_code_quality(&twice)).unwrap();
        assert_ne!(report[0]["fingerprint"], report[1]["fingerprint"]);
        let once: Vec<serde_json::Value> =
            serde_json::from_str(&gitlab_code_quality(&twice[..1])).unwrap();
        assert_eq!(once[0]["fingerprint"], report[0]["fingerprint"]);
    }

    #[test]
    fn a_comment_is_cut_to_its_limit_or_refused() {
        let plan = Plan {
            notes: (0..50).map(|i| format!("note {i}")).collect(),
            ..Plan::default()
        };
        let full = plan_comment(&plan, &Comment::default()).unwrap();
        assert!(full.contains("<details><summary>50 notes</summary>"));
        for max in [300, 400, 511, full.len() - 1] {
            let comment = Comment {
                marker: Some("shop"),
                max_bytes: Some(max),
                see_all: None,
            };
            let cut = plan_comment(&plan, &comment).unwrap();
            assert!(cut.len() <= max, "{max}: {}", cut.len());
            let shown = cut.lines().filter(|l| l.starts_with("- note")).count();
            let left = 50 - shown;
            let rows = if left == 1 { "row" } else { "rows" };
            let notes = if left == 1 { "note" } else { "notes" };
            assert!(
                cut.ends_with(&format!(
                    "**{left} {rows} left out** to stay within {max} bytes ({left} {notes}): \
                     `kubectl camelk plan -o json` shows them all.\n"
                )),
                "{cut}"
            );
        }
        let tiny = Comment {
            max_bytes: Some(50),
            ..Comment::default()
        };
        assert!(matches!(plan_comment(&plan, &tiny), Err(TooSmall(n)) if n > 50));
    }

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert_eq!(choose(true, None), ColorChoice::Always);
        // An empty NO_COLOR does not count (no-color.org).
        assert_eq!(choose(true, Some(OsStr::new(""))), ColorChoice::Always);
        assert_eq!(choose(true, Some(OsStr::new("1"))), ColorChoice::Never);
        assert_eq!(choose(false, None), ColorChoice::Never);
        assert_eq!(choose(false, Some(OsStr::new(""))), ColorChoice::Never);
    }

    /// Styled text as a terminal gets it, and as a pipe gets it.
    fn both_ways(styled: &str) -> (String, String) {
        let through = |choice| {
            let mut out = AutoStream::new(Vec::new(), choice);
            out.write_all(styled.as_bytes()).unwrap();
            String::from_utf8(out.into_inner()).unwrap()
        };
        (through(ColorChoice::Always), through(ColorChoice::Never))
    }

    #[test]
    fn the_diff_is_coloured_on_a_terminal_and_plain_text_byte_for_byte_elsewhere() {
        let old = "a: 1\r\nb: 2\nc: 3\n";
        let new = "a: 1\r\nb: 20\nc: 3";
        let plain = similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header("a/m.yaml", "b/m.yaml")
            .to_string();
        let (terminal, pipe) = both_ways(&manifest_diff("m.yaml", old, new));
        assert_eq!(pipe, plain);
        assert!(terminal.contains("\x1b[31m-b: 2\x1b[0m\n"), "{terminal:?}");
        assert!(terminal.contains("\x1b[32m+b: 20\x1b[0m\n"), "{terminal:?}");
        assert!(
            terminal.contains("\x1b[36m@@ -1,3 +1,3 @@\x1b[0m\n"),
            "{terminal:?}"
        );
        assert!(
            terminal.starts_with("--- a/m.yaml\n+++ b/m.yaml\n"),
            "{terminal:?}"
        );
    }

    #[test]
    fn plan_headings_are_bold_on_a_terminal_only() {
        let plan = Plan {
            notes: vec!["one note".into()],
            ..Plan::default()
        };
        let (terminal, pipe) = both_ways(&plan_table(&plan));
        assert!(
            terminal.starts_with("\x1b[1mPlan:\x1b[0m 0 moves"),
            "{terminal:?}"
        );
        assert!(
            terminal.contains("\n\x1b[1mNotes\x1b[0m\n- one note\n"),
            "{terminal:?}"
        );
        assert!(!pipe.contains('\x1b'), "{pipe:?}");
        assert!(pipe.starts_with("Plan: 0 moves in 0 batches"), "{pipe:?}");
        assert!(pipe.ends_with("\nNotes\n- one note\n"), "{pipe:?}");
    }

    /// A terminal that keeps what is written on it.
    #[derive(Debug, Default, Clone)]
    struct Screen(std::sync::Arc<std::sync::Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.write_str("<clear>")
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn handoff_progress_is_one_line_redrawn_on_a_terminal() {
        let screen = Screen::default();
        let mut progress =
            HandoffProgress::to(ProgressDrawTarget::term_like(Box::new(screen.clone())));
        progress.show(&Progress {
            total: 3,
            done: 1,
            waiting_on: Some("Integration shop/orders".into()),
        });
        let drawn = screen.0.lock().unwrap().clone();
        assert!(
            drawn.contains("  1/3 moved, waiting on Integration shop/orders"),
            "{drawn:?}"
        );
        progress.show(&Progress {
            total: 3,
            done: 3,
            waiting_on: None,
        });
        progress.finish();
        let drawn = screen.0.lock().unwrap().clone();
        let states: Vec<&str> = drawn.split("<clear>").map(str::trim_end).collect();
        assert_eq!(
            states,
            [
                "  1/3 moved, waiting on Integration shop/orders",
                "  3/3 moved",
                // finish() draws the last state once more, to keep it.
                "  3/3 moved",
            ],
            "{drawn:?}"
        );
    }

    #[test]
    fn handoff_progress_off_a_terminal_draws_nothing() {
        let mut progress = HandoffProgress::to(ProgressDrawTarget::hidden());
        assert!(progress.bar.is_hidden());
        let p = Progress {
            total: 2,
            done: 1,
            waiting_on: None,
        };
        progress.show(&p);
        progress.show(&p);
        assert_eq!(progress.last, "  1/2 moved");
        progress.finish();
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
