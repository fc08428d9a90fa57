//! `local-cluster`: bring the project's local control plane up or down.
//! `make local-cluster` and `make local-cluster-down` call it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use camelk_testkit::binaries::control_plane_bin_dir;
use camelk_testkit::cluster::{self, ClusterDir, StartOptions};
use camelk_testkit::crds::CrdSource;
use clap::{Parser, Subcommand};

/// Run a local Kubernetes control plane (etcd, kube-apiserver,
/// kube-controller-manager, kube-scheduler, and KWOK simulating one node) on
/// loopback, with the Camel K CRDs installed.
#[derive(Parser, Debug)]
#[command(name = "local-cluster")]
struct Cli {
    /// State directory: kubeconfig, audit log, logs, keys, etcd data.
    #[arg(long, global = true, default_value = ".local-cluster")]
    dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the control plane in the background and write its kubeconfig.
    Up,
    /// Stop every process `up` started.
    Down,
    /// Say whether the control plane is running.
    Status,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let dir = match std::path::absolute(&cli.dir) {
        Ok(d) => ClusterDir::new(d),
        Err(e) => {
            eprintln!("error: {}: {e}", cli.dir.display());
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Up => up(dir).await,
        Command::Down => {
            let stopped = cluster::stop(&dir);
            if stopped.is_empty() {
                println!(
                    "no local control plane running from {}",
                    dir.root().display()
                );
            }
            for (name, pid) in stopped {
                println!("stopped {name} (pid {pid})");
            }
            ExitCode::SUCCESS
        }
        Command::Status => {
            let running = cluster::running_processes(&dir);
            if running.is_empty() {
                println!("not running ({})", dir.root().display());
                return ExitCode::from(1);
            }
            for (name, pid) in running {
                println!("{name}: running (pid {pid})");
            }
            println!("kubeconfig: {}", dir.kubeconfig().display());
            ExitCode::SUCCESS
        }
    }
}

async fn up(dir: ClusterDir) -> ExitCode {
    let started_at = Instant::now();
    let bin_dir = match control_plane_bin_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let opts = StartOptions {
        dir,
        bin_dir,
        crds: CrdSource::locate(),
    };
    match cluster::start(&opts).await {
        Ok(c) => {
            println!(
                "local control plane ready in {:.1}s",
                started_at.elapsed().as_secs_f64()
            );
            println!("  server:     {}", c.server);
            for (name, pid) in &c.processes {
                println!("  {name:<24}pid {pid}");
            }
            println!("  kubeconfig: {}", c.dir.kubeconfig().display());
            println!("  audit log:  {}", c.dir.audit_log().display());
            let names: Vec<&str> = c.identities.iter().map(|i| i.name.as_str()).collect();
            println!("  contexts:   {} (current: admin)", names.join(", "));
            println!("\n  export KUBECONFIG={}", c.dir.kubeconfig().display());
            ExitCode::SUCCESS
        }
        Err(camelk_testkit::Error::AlreadyRunning(msg)) => {
            eprintln!("error: {msg} (make local-cluster-down)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("logs: {}", opts.dir.root().join("logs").display());
            ExitCode::from(1)
        }
    }
}
