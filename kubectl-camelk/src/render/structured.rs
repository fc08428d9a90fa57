//! Output for machines: `-o json` and `-o yaml`.

use crate::cli::Output;

/// `value` as `-o json` (pretty, one trailing newline) or `-o yaml`.
pub fn structured<T: serde::Serialize>(value: &T, output: Output) -> String {
    match output {
        Output::Yaml => serde_saphyr::to_string(value).expect("plain data serializes to YAML"),
        _ => serde_json::to_string_pretty(value).expect("plain data serializes to JSON") + "\n",
    }
}
