//! `Manifest::parse` (YAML syntax, header, unknown fields, typed reading,
//! validation) on any text. Checks its contract: it never panics; an invalid
//! manifest has at least one error, and every diagnostic points inside the
//! file (line and column from 1); a valid one carries warnings only; and a
//! valid manifest written again as JSON (a YAML document too) is valid and
//! reads the same.
#![no_main]

use camelk_reconciler::manifest::{Manifest, ManifestError, Severity};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // YAML's line breaks: CR LF, CR or LF.
    let lines = text.replace("\r\n", "\n").matches(['\r', '\n']).count() + 1;
    match Manifest::parse("fuzz.yaml", text.to_string()) {
        Err(ManifestError::Invalid(diagnostics)) => {
            assert!(
                diagnostics.iter().any(|d| d.severity == Severity::Error),
                "invalid without an error: {diagnostics:?}"
            );
            for d in &diagnostics {
                assert_eq!(d.file, "fuzz.yaml");
                assert!(
                    d.at.line >= 1 && d.at.column >= 1 && d.at.line <= lines,
                    "{d} is outside the {lines} lines of the file"
                );
                assert!(!d.message.is_empty(), "{d:?}");
            }
        }
        Err(e @ ManifestError::Read { .. }) => panic!("parse read a file: {e}"),
        Ok(manifest) => {
            assert!(
                manifest
                    .warnings
                    .iter()
                    .all(|w| w.severity == Severity::Warning)
            );
            let json = serde_json::to_string(&manifest.assignment).expect("serializable");
            let again = Manifest::parse("fuzz.json", json.clone())
                .unwrap_or_else(|e| panic!("valid {text:?} is invalid as JSON {json}: {e}"));
            assert_eq!(
                serde_json::to_value(&again.assignment).unwrap(),
                serde_json::to_value(&manifest.assignment).unwrap(),
                "{json}"
            );
        }
    }
});
