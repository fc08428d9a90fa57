//! `reconciler`: the GitOps reconciler and scoped operator runtime.
//! Parses arguments and hands off to the library; no decisions live here.
//!
//! Exit codes: 0 success, 1 runtime failure (a CustomResourceDefinition
//! `sync` or `operator` needs is not installed among them: checked first,
//! before anything is written), 2 bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use camelk_reconciler::api::{OperatorId, parse_duration};
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::connect::Clients;
use camelk_reconciler::lock::LockTiming;
use camelk_reconciler::operator::{self, OperatorConfig};
use camelk_reconciler::preflight::{self, Crd, PreflightError};
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

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
    /// Run the scoped operator loops of one operator id.
    Operator(Box<OperatorArgs>),
    /// Sync the OperatorAssignment from Git (or the object in the cluster):
    /// validate, plan, and execute the migration step by step through
    /// guarded handoffs.
    Sync(Box<SyncArgs>),
}

#[derive(Args, Debug)]
struct Connection {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
struct OperatorArgs {
    /// The operator id: the value of camel.apache.org/operator.id it owns.
    #[arg(long)]
    id: String,
    /// Watch only this namespace (repeatable; default: all namespaces).
    #[arg(long = "namespace", short = 'n')]
    namespaces: Vec<String>,
    /// Namespace of the operator lock Lease `<id>-lock`.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lock_namespace: String,
    /// Identity of this replica in the lock (default: host name and process id).
    #[arg(long)]
    identity: Option<String>,
    /// Operator version stamped on the workloads it deploys.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    operator_version: String,
    /// How long a build of the reference lifecycle takes.
    #[arg(long, value_parser = duration, default_value = "5s")]
    build_time: Duration,
    /// Lock lease duration.
    #[arg(long, value_parser = duration, default_value = "15s")]
    lease_duration: Duration,
    /// Lock renew deadline (must be below the lease duration).
    #[arg(long, value_parser = duration, default_value = "10s")]
    renew_deadline: Duration,
    /// Lock retry period (must be below the renew deadline).
    #[arg(long, value_parser = duration, default_value = "2s")]
    retry_period: Duration,
    /// Reconcile everything this often even without events.
    #[arg(long, value_parser = duration, default_value = "1s")]
    resync: Duration,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Args, Debug)]
struct SyncArgs {
    /// Where the OperatorAssignment comes from: `git` (--repo, --branch,
    /// --path) or `cluster` (the object --name in --namespace, as Argo CD or
    /// Flux applied it; the sync then never applies it, only writes its status).
    #[arg(long, value_enum, default_value = "git")]
    source: SourceKind,
    /// Name of the OperatorAssignment object (with --source cluster).
    #[arg(long)]
    name: Option<String>,
    /// Git repository: a path, file://, https:// or ssh:// URL (with --source git).
    #[arg(long)]
    repo: Option<String>,
    /// Branch to follow.
    #[arg(long, default_value = "main")]
    branch: String,
    /// Path of the manifest inside the repository.
    #[arg(long, default_value = "operator-assignment.yaml")]
    path: String,
    /// How often the branch is fetched.
    #[arg(long, value_parser = duration, default_value = "30s")]
    interval: Duration,
    /// Directory of the cache clone (default: a directory under the system temp dir).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Namespace of the OperatorAssignment object.
    #[arg(long, short = 'n', env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Namespace of the reconciler's lock `camelk-reconciler-lock` (default: --namespace).
    #[arg(long)]
    lock_namespace: Option<String>,
    /// Identity of this replica (default: host name and process id).
    #[arg(long)]
    identity: Option<String>,
    /// The reconciler's lock lease duration.
    #[arg(long, value_parser = duration, default_value = "15s")]
    lease_duration: Duration,
    /// The reconciler's lock renew deadline.
    #[arg(long, value_parser = duration, default_value = "10s")]
    renew_deadline: Duration,
    /// The reconciler's lock retry period.
    #[arg(long, value_parser = duration, default_value = "2s")]
    retry_period: Duration,
    /// Lease duration of the operators' locks, to judge them alive or dead.
    #[arg(long, value_parser = duration, default_value = "15s")]
    operator_lease_duration: Duration,
    /// How often handoffs and health gates are polled.
    #[arg(long, value_parser = duration, default_value = "500ms")]
    poll: Duration,
    /// Address of /healthz, /readyz, /metrics and POST /hooks/git.
    #[arg(long, default_value = "0.0.0.0:8080")]
    listen: String,
    /// File holding the webhook's HMAC-SHA256 secret (without it, /hooks/git refuses every request).
    #[arg(long)]
    webhook_secret_file: Option<PathBuf>,
    /// File holding the bearer token of GET /plan, the plan of any revision
    /// for CI jobs without cluster credentials (read at each request; without
    /// it the endpoint is off). Needs --source git.
    #[arg(long)]
    plan_token_file: Option<PathBuf>,
    /// Where the Secrets that the manifest's notifications name are mounted,
    /// one folder per Secret, its keys as files (the chart mounts those of
    /// notifications.secrets here).
    #[arg(long, default_value = "/etc/camelk/notifications")]
    notification_secrets_dir: PathBuf,
    /// What the watches of Camel K resources fetch and keep: `metadata`
    /// (labels and owner annotation only) or `full` (whole objects, as a
    /// plain informer; for comparison).
    #[arg(long, default_value = "metadata")]
    live_cache: camelk_reconciler::sync::LiveCacheMode,
    #[command(flatten)]
    credentials: GitCredentialArgs,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SourceKind {
    Git,
    Cluster,
}

/// Git credentials, read again at every fetch (rotation needs no restart).
/// Without them: $CAMELK_GIT_TOKEN, Git's credential helper, the ssh-agent.
#[derive(Args, Debug)]
struct GitCredentialArgs {
    /// File holding an HTTPS access token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Username sent with the token (default: the URL's, else x-access-token).
    #[arg(long)]
    username: Option<String>,
    /// File holding an SSH private key (ssh:// remotes).
    #[arg(long)]
    ssh_key_file: Option<PathBuf>,
    /// File holding the passphrase of --ssh-key-file.
    #[arg(long, requires = "ssh_key_file")]
    ssh_passphrase_file: Option<PathBuf>,
    /// OpenSSH known_hosts file: an ssh:// host whose key it does not list is refused.
    #[arg(long)]
    known_hosts_file: Option<PathBuf>,
    /// Secret NAMESPACE/NAME with keys token (or password), username,
    /// ssh-privatekey (or identity), ssh-passphrase, known_hosts.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with_all = ["token_file", "ssh_key_file", "ssh_passphrase_file", "known_hosts_file"])]
    credentials_secret: Option<String>,
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration (like 500ms, 5s, 2m)"))
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn main() -> ExitCode {
    camelk_reconciler::git::set_network_timeouts();
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("reconciler {}", env!("CARGO_PKG_VERSION")),
        Command::Crds => print!("{}", camelk_reconciler::api::crd_yaml()),
        Command::Operator(args) => return run_operator(*args),
        Command::Sync(args) => return run_sync(*args),
    }
    ExitCode::SUCCESS
}

fn identity(given: Option<String>) -> String {
    given.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    })
}

/// Cancelled on SIGTERM or Ctrl-C.
fn on_signal() -> CancellationToken {
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        token.cancel();
    });
    shutdown
}

async fn clients(connection: &Connection) -> Result<Clients, String> {
    let config = camelk_reconciler::connect::config(
        connection.kubeconfig.as_deref(),
        connection.context.as_deref(),
    )
    .await
    .map_err(|e| e.to_string())?;
    Clients::new(config).map_err(|e| format!("creating a Kubernetes client: {e}"))
}

/// Checks, before anything is written (no Lease, no Event, no status), that
/// the CRDs in `required` are installed: when one is not, says which and how
/// to install it, and returns the exit code. Optional ones that are missing
/// are logged once each.
async fn check_crds(
    client: &kube::Client,
    required: &[Crd],
    optional: &[Crd],
) -> Result<(), ExitCode> {
    match preflight::check_crds(client, required, optional).await {
        Ok(absent) => {
            for crd in absent {
                tracing::info!("{}", crd.skipped_note());
            }
            Ok(())
        }
        Err(PreflightError::Missing(missing)) => {
            eprintln!("error: {missing}");
            for hint in missing.hints() {
                eprintln!("hint: {hint}");
            }
            Err(ExitCode::from(1))
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// The Camel K kinds but `required`, as optional CRDs.
fn other_camel_kinds(required: &[Crd]) -> Vec<Crd> {
    preflight::camel_kinds(&CamelKind::ALL)
        .into_iter()
        .filter(|crd| !required.contains(crd))
        .collect()
}

fn run_sync(args: SyncArgs) -> ExitCode {
    use camelk_reconciler::source::SecretRef;
    use camelk_reconciler::source::{ClusterSource, CredentialConfig, GitSource, Source};
    use camelk_reconciler::sync::{self, SyncConfig};
    init_logs(args.connection.log_format);
    let timing = |lease, renew, retry| {
        LockTiming::new(lease, renew, retry).map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(2)
        })
    };
    let lock_timing = match timing(args.lease_duration, args.renew_deadline, args.retry_period) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let operator_lock_timing = LockTiming {
        lease_duration: args.operator_lease_duration,
        ..LockTiming::DEFAULT
    };
    let identity = identity(args.identity.clone());
    let cache = args.cache_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("camelk-reconciler-cache-{identity}"))
    });
    let creds = &args.credentials;
    let credentials_secret = match creds
        .credentials_secret
        .as_deref()
        .map(|s| s.split_once('/'))
    {
        None => None,
        Some(Some((namespace, name))) if !namespace.is_empty() && !name.is_empty() => {
            Some((namespace.to_string(), name.to_string()))
        }
        Some(_) => {
            eprintln!("error: --credentials-secret takes NAMESPACE/NAME");
            return ExitCode::from(2);
        }
    };
    let git_flags = args.repo.is_some()
        || creds.token_file.is_some()
        || creds.ssh_key_file.is_some()
        || creds.known_hosts_file.is_some()
        || credentials_secret.is_some();
    match (args.source, &args.repo, &args.name) {
        (SourceKind::Git, None, _) => {
            eprintln!("error: --source git needs --repo");
            return ExitCode::from(2);
        }
        (SourceKind::Git, Some(_), Some(_)) => {
            eprintln!(
                "error: --name is for --source cluster (with git the manifest names the object)"
            );
            return ExitCode::from(2);
        }
        (SourceKind::Cluster, _, None) => {
            eprintln!("error: --source cluster needs --name");
            return ExitCode::from(2);
        }
        (SourceKind::Cluster, _, Some(_)) if git_flags => {
            eprintln!("error: --repo and the Git credential flags are for --source git");
            return ExitCode::from(2);
        }
        _ => {}
    }
    // Before connecting or fetching: a refspec is built from it.
    if args.source == SourceKind::Git
        && let Err(e) = camelk_reconciler::source::check_branch(&args.branch)
    {
        eprintln!("error: --branch: {e}");
        return ExitCode::from(2);
    }
    let credentials = CredentialConfig {
        username: creds.username.clone(),
        token_file: creds.token_file.clone(),
        ssh_key_file: creds.ssh_key_file.clone(),
        ssh_passphrase_file: creds.ssh_passphrase_file.clone(),
        known_hosts_file: creds.known_hosts_file.clone(),
        secret: None,
    };
    let cfg = SyncConfig {
        lock_namespace: args
            .lock_namespace
            .clone()
            .unwrap_or_else(|| args.namespace.clone()),
        namespace: args.namespace.clone(),
        identity,
        lock_timing,
        operator_lock_timing,
        interval: args.interval,
        poll: args.poll,
        live_cache: args.live_cache,
        clock: camelk_reconciler::sync::Clock::system(),
        notification_secrets: args.notification_secrets_dir.clone(),
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async move {
        let clients = match clients(&args.connection).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        let client = clients.work.clone();
        // The OperatorAssignment is applied (Git source) or read (cluster
        // source), and its status written; Integrations are what it moves.
        let required = [Crd::OperatorAssignment, Crd::INTEGRATION];
        if let Err(code) = check_crds(&client, &required, &other_camel_kinds(&required)).await {
            return code;
        }
        let secret = match &args.webhook_secret_file {
            Some(path) => match std::fs::read(path) {
                Ok(bytes) => Some(bytes.trim_ascii().to_vec()),
                Err(e) => {
                    eprintln!("error: reading {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            },
            None => None,
        };
        let listener = match tokio::net::TcpListener::bind(&args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: listening on {}: {e}", args.listen);
                return ExitCode::from(1);
            }
        };
        let source: Source = match (&args.repo, &args.name) {
            (Some(repo), _) => GitSource::new(repo, &args.branch, &args.path, &cache)
                .with_credentials(CredentialConfig {
                    secret: credentials_secret.map(|(namespace, name)| SecretRef {
                        client: client.clone(),
                        namespace,
                        name,
                    }),
                    ..credentials
                })
                .into(),
            (None, name) => ClusterSource::new(
                client.clone(),
                &args.namespace,
                name.as_deref().unwrap_or_default(),
            )
            .into(),
        };
        let serving = sync::Serving {
            listener,
            webhook_secret: secret,
            plan_token_file: args.plan_token_file.clone(),
        };
        sync::run(clients, source, cfg, Some(serving), on_signal()).await;
        ExitCode::SUCCESS
    })
}

fn run_operator(args: OperatorArgs) -> ExitCode {
    init_logs(args.connection.log_format);
    let id = match OperatorId::new(args.id.clone()) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("error: --id: {e}");
            return ExitCode::from(2);
        }
    };
    let timing = match LockTiming::new(args.lease_duration, args.renew_deadline, args.retry_period)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    let cfg = OperatorConfig {
        id,
        lock_namespace: args.lock_namespace.clone(),
        namespaces: args.namespaces.clone(),
        identity,
        version: args.operator_version.clone(),
        build_time: args.build_time,
        timing,
        resync: args.resync,
    };
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async move {
        let clients = match clients(&args.connection).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        let client = clients.work.clone();
        // What the reference lifecycle creates (kits, builds) and what it
        // runs; the other kinds it reconciles or reads are optional.
        let required = [
            Crd::INTEGRATION,
            Crd::Camel(CamelKind::IntegrationKit),
            Crd::Camel(CamelKind::Build),
        ];
        if let Err(code) = check_crds(&client, &required, &other_camel_kinds(&required)).await {
            return code;
        }
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            on_signal.cancel();
        });
        operator::run(clients, cfg, shutdown).await;
        ExitCode::SUCCESS
    })
}
