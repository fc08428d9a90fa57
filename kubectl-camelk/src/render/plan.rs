//! The plan for people: its one-line summary and a table per section. The
//! sections (rows and headers) are shared with the pull-request comment.

use camelk_reconciler::plan::Plan;

use super::colour::{HEADING, paint};
use super::table::table;

/// The plan in one line: how many moves, batches, first assignments,
/// blocked moves, errors and conflicts, and what stays as it is.
pub(super) fn summary(plan: &Plan) -> String {
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

/// The plan's rows, section by section, one cell per column of its header.
pub(super) struct Sections {
    pub(super) moves: Vec<Vec<String>>,
    pub(super) first: Vec<Vec<String>>,
    pub(super) blocked: Vec<Vec<String>>,
    pub(super) conflicts: Vec<Vec<String>>,
    pub(super) errors: Vec<Vec<String>>,
    pub(super) restarts: Vec<Vec<String>>,
}

pub(super) fn sections(plan: &Plan) -> Sections {
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
        restarts: plan
            .restarts
            .iter()
            .map(|r| {
                vec![
                    r.resource.namespace.clone(),
                    r.resource.name.clone(),
                    if r.rolls { "roll" } else { "stay" }.to_string(),
                    r.why.join("; "),
                    r.capacity_risk.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect(),
    }
}

pub(super) const MOVE_HEADER: [&str; 7] =
    ["BATCH", "KIND", "NAMESPACE", "NAME", "FROM", "TO", "WHY"];
pub(super) const FIRST_HEADER: [&str; 5] = ["KIND", "NAMESPACE", "NAME", "TO", "WHY"];
pub(super) const BLOCKED_HEADER: [&str; 6] =
    ["KIND", "NAMESPACE", "NAME", "FROM", "TO", "BLOCKED BECAUSE"];
pub(super) const ERROR_HEADER: [&str; 4] = ["KIND", "NAMESPACE", "NAME", "ERROR"];
/// Label and annotation that disagree: the annotation owns (upstream obeys it).
pub(super) const CONFLICT_HEADER: [&str; 7] = [
    "KIND",
    "NAMESPACE",
    "NAME",
    "LABEL",
    "ANNOTATION (OWNER)",
    "KEYS APPLIED BY",
    "SYNC",
];
pub(super) const CONFLICT_TITLE: &str = "Owner keys that disagree";
/// Whether each moved Integration's pods roll, and what that can cost.
pub(super) const RESTART_HEADER: [&str; 5] =
    ["NAMESPACE", "INTEGRATION", "PODS", "WHY", "CAPACITY RISK"];
pub(super) const RESTART_TITLE: &str = "Pod restarts";

/// The plan for people, section headings in bold (styled: print it with
/// [`print_styled`](super::print_styled)).
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
    section(RESTART_TITLE, &RESTART_HEADER, &s.restarts);
    if !plan.notes.is_empty() {
        out.push_str(&format!("\n{}\n", paint("Notes", HEADING)));
        for note in &plan.notes {
            out.push_str(&format!("- {note}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::render::colour::both_ways;

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
}
