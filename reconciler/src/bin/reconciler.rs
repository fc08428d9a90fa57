//! `reconciler`: the GitOps reconciler and scoped operator runtime.
//! Parses arguments and hands off to the library; no decisions live here.

use clap::{Parser, Subcommand};

/// GitOps reconciler for Apache Camel K operator assignment.
#[derive(Parser, Debug)]
#[command(name = "reconciler", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the version of this binary.
    Version,
    /// Print the CustomResourceDefinitions of the project's own kinds (YAML).
    Crds,
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("reconciler {}", env!("CARGO_PKG_VERSION")),
        Command::Crds => print!("{}", camelk_reconciler::api::crd_yaml()),
    }
}
