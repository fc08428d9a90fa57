//! `kubectl camelk validate`.

use camelk_reconciler::manifest::{Manifest, ManifestError};

use crate::cli::{ManifestArgs, Output};

/// Prints the findings; fails when the manifest has errors.
pub fn run(args: &ManifestArgs, output: Output) -> anyhow::Result<()> {
    let location = super::locate(args, false)?;
    match Manifest::read(&location.path, &location.display) {
        Ok(manifest) => {
            match output {
                Output::Json => println!(
                    "{}",
                    serde_json::json!({ "valid": true, "diagnostics": manifest.warnings })
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
        Err(error @ ManifestError::Invalid(_)) if output == Output::Json => {
            println!(
                "{}",
                serde_json::json!({ "valid": false, "diagnostics": error.diagnostics() })
            );
            Err(crate::Reported.into())
        }
        Err(error) => Err(error.into()),
    }
}
