//! `kubectl camelk`: a kubectl plugin that assigns Apache Camel K resources to
//! operators in Git and shows each change as a planned migration.
//! Parses arguments, renders results and sets exit codes; decisions live in the
//! `camelk_reconciler` library.
//!
//! Exit codes: 0 success; 1 error. `diff`: 0 nothing would change, 1
//! something would, 2 error (as `kubectl diff`). `sync --wait`: 0 when the
//! reconciler applied the revision, 1 when it ended stalled or failed, or the
//! timeout passed.
//!
//! Each module imports only modules below it (`tests/layers.rs` checks):
//! `sigpipe` and `cli` (argument parsing, every parser of argument text)
//! import nothing of the crate; `render` (tables, Markdown, colour, progress,
//! error reports) reads `cli`'s types; `commands` turn arguments into
//! library calls and print through `render`; `complete` answers kubectl's
//! completion; `main` parses, dispatches and sets the exit code.
//!
//! Layers, top to bottom:
//!
//! ```text
//! complete
//! commands
//! render
//! cli sigpipe
//! ```

mod cli;
mod commands;
mod complete;
mod render;
mod sigpipe;

use std::process::ExitCode;

use camelk_reconciler::manifest::ManifestError;
use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command};
use render::Reported;

fn main() -> ExitCode {
    sigpipe::die_quietly_on_closed_pipe();
    camelk_reconciler::git::set_network_timeouts();
    if invoked_as(complete::COMPLETER) {
        let words: Vec<String> = std::env::args().skip(1).collect();
        print!("{}", complete::answer(&mut Cli::command(), &words));
        return ExitCode::SUCCESS;
    }
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let command = matches.subcommand_name().unwrap_or_default();
    if !cli.output.is_for(command) {
        eprintln!("error: {}", cli.output.refusal(command));
        return ExitCode::from(if command == "diff" { 2 } else { 1 });
    }
    if !cli.command.connects() {
        skip_ca_bundle();
    }
    let is_diff = matches!(cli.command, Command::Diff(_));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(code) => code,
        Err(error) => {
            if error.downcast_ref::<Reported>().is_some() {
                // Already printed.
            } else if let Some(invalid @ ManifestError::Invalid(_)) =
                error.downcast_ref::<ManifestError>()
            {
                // Each line already says `file:line:column: error: ...`.
                eprintln!("{invalid}");
            } else {
                let missing_manifest = matches!(
                    error.downcast_ref::<ManifestError>(),
                    Some(ManifestError::Read { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound
                );
                let error = if missing_manifest {
                    error.context(render::Hint(
                        "create one with `kubectl camelk init`, or name it with --file".into(),
                    ))
                } else {
                    error
                };
                eprintln!("{}", render::error_report(&error));
            }
            ExitCode::from(if is_diff { 2 } else { 1 })
        }
    }
}

/// Whether this binary was started through a link named `name`.
fn invoked_as(name: &str) -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .is_some_and(|path| path.file_name().is_some_and(|file| file == name))
}

/// libgit2 starts OpenSSL with the system CA bundle loaded (17 ms of
/// certificate parsing, two thirds of a small `assign` that stops early),
/// whether or not anything connects. A command that opens no connection points OpenSSL
/// at an empty bundle instead; git2 keeps a `SSL_CERT_FILE` that exists.
#[allow(unsafe_code)]
fn skip_ca_bundle() {
    // SAFETY: called first in `main`, before the runtime or any other thread
    // exists, so nothing reads or writes the environment concurrently.
    unsafe { std::env::set_var("SSL_CERT_FILE", "/dev/null") }
}

async fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Validate(args) => commands::validate::run(args, cli.output)?,
        Command::Init(args) => commands::edit::init(cli, args).await?,
        Command::Assign(args) => commands::edit::assign(cli, args).await?,
        Command::Unassign(args) => commands::edit::unassign(cli, args).await?,
        Command::Rollout(args) => commands::edit::rollout(cli, args).await?,
        Command::Revert(args) => commands::edit::revert(cli, args).await?,
        Command::StripOwnerKeys(args) => commands::strip_owner_keys::run(cli, args).await?,
        Command::Plan(args) => {
            commands::plan::run(cli, args).await?;
        }
        Command::Diff(args) => {
            let plan = commands::plan::run(cli, args).await?;
            return Ok(if plan.has_changes() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            });
        }
        Command::Move(args) => return commands::ownership::move_(cli, args).await,
        Command::Get(args) => commands::ownership::get(cli, args).await?,
        Command::Operators(args) => commands::ownership::operators(cli, args).await?,
        Command::Status(args) => commands::assignments::status(cli, args).await?,
        Command::Sync(args) => return commands::sync::run(cli, args).await,
        Command::Check(args) => return commands::check::run(cli, args).await,
        Command::Events(args) => commands::events::run(cli, args).await?,
        Command::History(args) => commands::history::run(cli, args).await?,
        Command::Approve(args) => commands::approve::run(cli, args).await?,
        Command::Suspend(args) => commands::assignments::suspend(cli, args, true).await?,
        Command::Resume(args) => commands::assignments::suspend(cli, args, false).await?,
        Command::Completion { shell } => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "kubectl-camelk",
                &mut std::io::stdout(),
            );
        }
        Command::Version(args) => commands::version::run(cli, args).await?,
    }
    Ok(ExitCode::SUCCESS)
}
