//! What a pull request shows: the plan as a Markdown comment, and the
//! manifest's diagnostics as annotations on the lines of its diff (GitHub
//! workflow commands, GitLab Code Quality).

use camelk_reconciler::manifest::{Diagnostic, Severity};
use camelk_reconciler::plan::Plan;

use super::plan::{
    BLOCKED_HEADER, CONFLICT_HEADER, CONFLICT_TITLE, ERROR_HEADER, FIRST_HEADER, MOVE_HEADER,
    RESTART_HEADER, RESTART_TITLE, sections, summary,
};

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
            title: RESTART_TITLE,
            header: Some(&RESTART_HEADER),
            noun: ("forecast restart", "forecast restarts"),
            rows: table_rows(s.restarts),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
