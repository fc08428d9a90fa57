//! `kubectl camelk validate`.

use camelk_reconciler::manifest::{Manifest, ManifestError};

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
                _ => {
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
            Err(crate::Reported.into())
        }
        Err(error) => Err(error.into()),
    }
}
