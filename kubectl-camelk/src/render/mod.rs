//! Rendering for people and machines, one purpose per file:
//!
//! - `colour`: styles, and whether stdout keeps them (a terminal without
//!   NO_COLOR) or strips them (a pipe, a file);
//! - `table`: aligned columns as kubectl prints them, and ages;
//! - `diff`: the manifest's change as a coloured unified diff;
//! - `status`: what `status` shows of an OperatorAssignment;
//! - `plan`: the plan's summary and its table for people;
//! - `pull_request`: the plan as a pull-request comment, and diagnostics as
//!   CI annotations (GitHub workflow commands, GitLab Code Quality);
//! - `findings`: the findings of `check` and their report;
//! - `structured`: `-o json` and `-o yaml`;
//! - `progress`: the progress line of `move --wait`;
//! - `errors`: error reports, hints, and errors already printed.
//!
//! Data flows one way: `colour` and `table` are read by the views above
//! them, `plan` by `pull_request`; no file reads one above it. Callers use
//! only what is re-exported here.
//!
//! Layer: below `commands`, above `cli` (whose types it reads).

mod colour;
mod diff;
mod errors;
mod findings;
mod plan;
mod progress;
mod pull_request;
mod status;
mod structured;
mod table;

pub use colour::print_styled;
pub use diff::manifest_diff;
pub use errors::{Hint, Reported, error_report};
pub use findings::{Finding, Verdict, check_report};
pub use plan::plan_table;
pub use progress::HandoffProgress;
pub use pull_request::{
    Comment, TooSmall, github_annotations, gitlab_code_quality, plan_comment, plan_markdown,
};
pub use status::assignment_status;
pub use structured::structured;
pub use table::{age, rows_table, table, table_row};
