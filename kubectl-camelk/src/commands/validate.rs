//! `kubectl camelk validate`.

use camelk_reconciler::manifest::{Diagnostic, Manifest, ManifestError};

use crate::cli::{ManifestArgs, Output};
use crate::render;

/// Prints the findings; fails when the manifest has errors.
pub fn run(args: &ManifestArgs, output: Output) -> anyhow::Result<()> {
    let location = super::locate(args, false)?;
    match Manifest::read(&location.path, &location.display) {
        Ok(manifest) => {
            match output {
                Output::Json | Output::Yaml => print!(
                    "{}",
                    render::structured(
                        &serde_json::json!({ "valid": true, "diagnostics": manifest.warnings }),
                        output
                    )
                ),
                Output::Github | Output::Gitlab => {
                    print!("{}", ci_report(&manifest.warnings, output));
                    // For the job's log; stdout is the CI system's.
                    for warning in &manifest.warnings {
                        eprintln!("{warning}");
                    }
                    eprintln!("{} is valid", location.display);
                }
                Output::Table | Output::Markdown | Output::Name | Output::Wide => {
                    for warning in &manifest.warnings {
                        eprintln!("{warning}");
                    }
                    println!("{} is valid", location.display);
                }
            }
            Ok(())
        }
        Err(error @ ManifestError::Invalid(_)) if output.is_structured() => {
            print!(
                "{}",
                render::structured(
                    &serde_json::json!({ "valid": false, "diagnostics": error.diagnostics() }),
                    output
                )
            );
            Err(render::Reported.into())
        }
        Err(error @ ManifestError::Invalid(_)) if output.is_ci() => {
            print!("{}", ci_report(error.diagnostics(), output));
            // The usual `file:line:column: error: ...` lines, for the log.
            eprintln!("{error}");
            Err(render::Reported.into())
        }
        Err(error) => Err(error.into()),
    }
}

/// The findings in the format of `-o github` or `-o gitlab`.
fn ci_report(diagnostics: &[Diagnostic], output: Output) -> String {
    match output {
        Output::Github => render::github_annotations(diagnostics),
        _ => render::gitlab_code_quality(diagnostics),
    }
}
