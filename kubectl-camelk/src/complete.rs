//! `kubectl camelk <TAB>`: kubectl (1.26 and later) completes a plugin's
//! arguments by running `kubectl_complete-camelk` with the words typed so far,
//! the last one partial. That name is a link to this binary; it answers in
//! the format kubectl's own completion reads: one candidate per line, then
//! `:` and a directive.

use clap::{Command, ValueEnum};

use crate::cli::Output;

/// The file name kubectl looks for on PATH.
pub const COMPLETER: &str = "kubectl_complete-camelk";

/// Let the shell complete file names.
const FILES: u8 = 0;
/// Offer only the candidates given.
const NO_FILES: u8 = 4;

/// The answer for `words` (everything after `kubectl camelk`).
pub fn answer(command: &mut Command, words: &[String]) -> String {
    command.build();
    let (last, before) = match words.split_last() {
        Some((last, before)) => (last.as_str(), before),
        None => ("", words),
    };
    let mut current: &Command = command;
    for word in before {
        if let Some(sub) = current.find_subcommand(word) {
            current = sub;
        }
    }
    let value_of = before.last().and_then(|w| takes_value(current, w));
    let (candidates, directive) = match value_of.map(|values| only_where_taken(current, values)) {
        // After a flag that takes a value: its values, or file names.
        Some(values) if values.is_empty() => (Vec::new(), FILES),
        Some(values) => (values, NO_FILES),
        None if last.starts_with('-') => (flags(current), NO_FILES),
        None => (
            current
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name().to_string())
                .collect(),
            NO_FILES,
        ),
    };
    let mut out: String = candidates
        .into_iter()
        .filter(|c| c.starts_with(last))
        .map(|c| c + "\n")
        .collect();
    out.push_str(&format!(":{directive}\n"));
    out
}

/// `Some(possible values)` when `word` is a flag of `command` that takes a value.
fn takes_value(command: &Command, word: &str) -> Option<Vec<String>> {
    let arg = command.get_arguments().find(|a| {
        word.strip_prefix("--")
            .is_some_and(|long| a.get_long() == Some(long))
            || word
                .strip_prefix('-')
                .and_then(|short| short.chars().next().filter(|_| short.len() == 1))
                .is_some_and(|short| a.get_short() == Some(short))
    })?;
    if !arg.get_action().takes_values() {
        return None;
    }
    Some(
        arg.get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect(),
    )
}

/// Only the formats the command prints ([`Output::is_for`]): `-o github`
/// is offered to `validate` alone, `-o name` to `get` and `status`.
fn only_where_taken(command: &Command, values: Vec<String>) -> Vec<String> {
    values
        .into_iter()
        .filter(|v| {
            Output::from_str(v, false).is_ok_and(|o| o.is_for(command.get_name()))
                || Output::from_str(v, false).is_err()
        })
        .collect()
}

fn flags(command: &Command) -> Vec<String> {
    command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|long| format!("--{long}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    fn complete(words: &[&str]) -> String {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        answer(&mut Cli::command(), &words)
    }

    #[test]
    fn subcommands_by_prefix() {
        assert_eq!(complete(&["ro"]), "rollout\n:4\n");
        assert_eq!(complete(&["rev"]), "revert\n:4\n");
        assert!(complete(&[""]).contains("assign\n"));
    }

    #[test]
    fn flags_of_the_subcommand_and_the_global_ones() {
        let out = complete(&["rollout", "--"]);
        assert!(out.contains("--steps\n"), "{out}");
        assert!(out.contains("--context\n"), "{out}");
        let out = complete(&["revert", "--"]);
        assert!(out.contains("--inventory\n"), "{out}");
        assert!(out.contains("--push\n"), "{out}");
    }

    #[test]
    fn values_of_a_flag_or_file_names() {
        assert_eq!(complete(&["plan", "-o", "y"]), "yaml\n:4\n");
        assert_eq!(complete(&["plan", "-o", "g"]), ":4\n");
        assert_eq!(complete(&["validate", "-o", "g"]), "github\ngitlab\n:4\n");
        assert_eq!(complete(&["plan", "--inventory", ""]), ":0\n");
    }
}
