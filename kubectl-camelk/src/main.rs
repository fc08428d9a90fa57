//! `kubectl camelk`: a kubectl plugin that assigns Apache Camel K resources to
//! operators in Git and shows each change as a planned migration.
//! Parses arguments, renders results and sets exit codes; decisions live in the
//! `camelk_reconciler` library.

use clap::{Parser, Subcommand};

/// Assign Apache Camel K resources to operators in Git, and plan the migrations.
#[derive(Parser, Debug)]
#[command(name = "kubectl camelk", bin_name = "kubectl camelk", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the version of this plugin.
    Version,
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("kubectl-camelk {}", env!("CARGO_PKG_VERSION")),
    }
}
