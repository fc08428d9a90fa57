//! Command-line arguments, following kubectl's conventions: global
//! `--kubeconfig`, `--context`, `-n/--namespace`, `-A/--all-namespaces`,
//! `-o/--output`, and usage text that says `kubectl camelk`.
//!
//! The bottom layer of the plugin: it imports nothing of the crate, and
//! owns every parser of argument text, so each command reads `KIND/NAME`
//! ([`parse_resource`]) and durations ([`duration`]) the same way.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use camelk_reconciler::api::parse_duration;
use camelk_reconciler::camel_k::CamelKind;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Assign Apache Camel K resources to operators in Git, and plan the migrations.
#[derive(Parser, Debug)]
#[command(name = "kubectl-camelk", bin_name = "kubectl camelk", version, about, long_about = None)]
pub struct Cli {
    /// Path to the kubeconfig file (default: $KUBECONFIG, a merged list, or ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace: of the resources named by assign/unassign, and of the
    /// manifests without one of strip-owner-keys (default: the context's
    /// namespace); the only one plan/diff show (default: the manifest's
    /// scope, else all).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace (plan and diff: list cluster-wide even when the scope names namespaces).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// User to impersonate for every request to the cluster (as kubectl's --as).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate, repeatable (as kubectl's --as-group).
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_groups: Vec<String>,
    /// How long to wait for each request to the cluster, watches included
    /// (e.g. 30s; 0: no limit), as kubectl's --request-timeout.
    #[arg(long, global = true, value_parser = duration, value_name = "DURATION")]
    pub request_timeout: Option<Duration>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    /// plan/diff: a pull-request comment.
    Markdown,
    Json,
    Yaml,
    /// validate: GitHub Actions annotations (workflow commands).
    Github,
    /// validate: a GitLab Code Quality report (JSON).
    Gitlab,
    /// get, status: one `kind.group/name` per line, as kubectl -o name.
    Name,
    /// get, operators: the table with more columns.
    Wide,
}

impl Output {
    /// JSON or YAML: the same document for scripts, in either notation.
    pub fn is_structured(self) -> bool {
        matches!(self, Output::Json | Output::Yaml)
    }

    /// A CI system's format for findings (only `validate` has findings).
    pub fn is_ci(self) -> bool {
        matches!(self, Output::Github | Output::Gitlab)
    }

    /// The commands a format belongs to, when not every one prints it.
    fn only_for(self) -> Option<&'static [&'static str]> {
        match self {
            Output::Github | Output::Gitlab => Some(&["validate"]),
            Output::Name => Some(&["get", "status"]),
            Output::Wide => Some(&["get", "operators"]),
            _ => None,
        }
    }

    /// Whether the subcommand named `command` prints this format. One rule
    /// for the check before a command runs and for shell completion.
    pub fn is_for(self, command: &str) -> bool {
        self.only_for()
            .is_none_or(|commands| commands.contains(&command))
    }

    /// Why `command` refuses this format, naming the ones it prints.
    pub fn refusal(self, command: &str) -> String {
        let name = |o: Output| {
            o.to_possible_value()
                .map(|v| v.get_name().to_string())
                .unwrap_or_default()
        };
        let users: Vec<String> = self
            .only_for()
            .unwrap_or_default()
            .iter()
            .map(|c| format!("`{c}`"))
            .collect();
        let printed: Vec<String> = Output::value_variants()
            .iter()
            .filter(|o| o.is_for(command))
            .map(|o| name(*o))
            .collect();
        format!(
            "-o {} is for {}; `{command}` prints {}",
            name(self),
            users.join(" and "),
            printed.join(", ")
        )
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check the OperatorAssignment manifest; errors name file:line:column.
    Validate(ManifestArgs),
    /// Write a commented starter manifest and commit it on a branch.
    Init(InitArgs),
    /// Pin resources to an operator (KIND/NAME, e.g. integration/orders).
    Assign(AssignArgs),
    /// Remove the pins of resources.
    Unassign(UnassignArgs),
    /// Move one operator's resources to another in steps.
    Rollout(RolloutArgs),
    /// Undo the manifest change a commit made, on a new branch (as `git
    /// revert`, but only the manifest's lines that commit changed).
    Revert(RevertArgs),
    /// Remove camel.apache.org/operator.id from the Camel K manifests a GitOps
    /// tool applies, on a new branch, once no resource would change owner.
    #[command(long_about = STRIP_OWNER_KEYS_HELP)]
    StripOwnerKeys(StripOwnerKeysArgs),
    /// Print what the manifest would change: moves in batches, first
    /// assignments, blocked moves and why.
    Plan(PlanArgs),
    /// Like `plan`, but exit 0 when nothing would change, 1 when something
    /// would, 2 or more on error (as `kubectl diff`).
    Diff(PlanArgs),
    /// Hand resources over to another operator now, through the guarded
    /// handoff (for clusters not driven from Git).
    Move(MoveArgs),
    /// List Camel K resources with the operator that owns each.
    Get(GetArgs),
    /// List operators: their lock, whether they renew it, how much they own.
    Operators(OperatorsArgs),
    /// Show what the reconciler reports on OperatorAssignments: revisions,
    /// conditions, rollout progress, owners, recent migrations.
    Status(StatusArgs),
    /// Ask the reconciler to sync an OperatorAssignment now (fetch, plan,
    /// act), as `flux reconcile`; with --wait, follow it until it is done.
    Sync(SyncArgs),
    /// Let a rollout step that waits for approval (`rollout.approval`)
    /// start: records you as its approver, for that revision and step only.
    Approve(ApproveArgs),
    /// Stop the reconciler from acting on an OperatorAssignment (as `flux suspend`).
    Suspend(NameArgs),
    /// Let the reconciler act on a suspended OperatorAssignment again.
    Resume(NameArgs),
    /// Check the installation, as `flux check`: CRDs, the reconciler and each
    /// operator renewing its lock, the admission policy and its identities,
    /// operators installed by OLM. Exit 0 when all hold, 1 otherwise.
    Check(CheckArgs),
    /// Show the Events the reconciler recorded (as `flux events`): on
    /// OperatorAssignments, and `Moved` on each moved resource; -w to follow.
    Events(EventsArgs),
    /// List the migrations the reconciler executed, newest first (as `argocd
    /// app history`); --revision REV lists the moves of one.
    History(HistoryArgs),
    /// Print a shell completion script.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the versions of this plugin, of the cluster's API server, and of
    /// the reconciler that last wrote each OperatorAssignment's status.
    Version(VersionArgs),
}

impl Command {
    /// Whether the command may open a network connection: to the cluster,
    /// or to the Git remote for `--push`.
    pub fn connects(&self) -> bool {
        match self {
            Command::Validate(_) | Command::Completion { .. } => false,
            Command::Version(args) => !args.client,
            Command::Init(InitArgs { edit, .. }) => edit.record.push,
            // An edit's plan reads the cluster unless given an inventory.
            Command::Assign(AssignArgs { edit, .. })
            | Command::Unassign(UnassignArgs { edit, .. })
            | Command::Rollout(RolloutArgs { edit, .. })
            | Command::Revert(RevertArgs { edit, .. }) => {
                edit.record.push || edit.inventory.is_none()
            }
            Command::StripOwnerKeys(args) => args.record.push || !args.no_cluster,
            Command::Plan(args) | Command::Diff(args) => args.inventory.is_none(),
            Command::Move(_)
            | Command::Get(_)
            | Command::Operators(_)
            | Command::Status(_)
            | Command::Sync(_)
            | Command::Approve(_)
            | Command::Suspend(_)
            | Command::Resume(_)
            | Command::Check(_)
            | Command::Events(_)
            | Command::History(_) => true,
        }
    }
}

/// Where the manifest is.
#[derive(Args, Debug, Clone)]
pub struct ManifestArgs {
    /// The Git checkout (default: the repository containing the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The manifest (default: operator-assignment.yaml at the repository root;
    /// relative paths are taken from --repo when given).
    #[arg(long, short = 'f', value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// How an edit of the manifest is recorded.
#[derive(Args, Debug, Clone)]
pub struct EditArgs {
    #[command(flatten)]
    pub manifest: ManifestArgs,
    #[command(flatten)]
    pub record: RecordArgs,
    /// Plan the change against this inventory (`kubectl get ... -o json`).
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
}

/// How an edit is recorded in Git: the flags of every command that edits files.
#[derive(Args, Debug, Clone)]
pub struct RecordArgs {
    /// Branch to commit on (default: a name derived from the change).
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Push the branch to the remote afterwards.
    #[arg(long)]
    pub push: bool,
    /// Remote to push to.
    #[arg(long, default_value = "origin", value_name = "NAME")]
    pub remote: String,
    /// Run even when the work tree has uncommitted changes (they are not committed).
    #[arg(long)]
    pub allow_dirty: bool,
    /// Show the diff and the plan; write, commit and push nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    /// metadata.name of the assignment.
    #[arg(long, default_value = "camel-k")]
    pub name: String,
    /// Operators as ID=NAMESPACE (repeatable).
    #[arg(long = "operator", value_name = "ID=NAMESPACE", default_values_t = ["operator-1=camel-k".to_string()])]
    pub operators: Vec<String>,
    /// The default operator (default: the first one).
    #[arg(long = "default", value_name = "ID")]
    pub default_operator: Option<String>,
}

#[derive(Args, Debug)]
pub struct AssignArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    /// Resources as KIND/NAME (kind names as kubectl takes them: integration, it, pipe, ...).
    #[arg(required = true, value_name = "KIND/NAME")]
    pub resources: Vec<String>,
    /// The operator to pin them to.
    #[arg(long, value_name = "OPERATOR")]
    pub to: String,
}

#[derive(Args, Debug)]
pub struct UnassignArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    #[arg(required = true, value_name = "KIND/NAME")]
    pub resources: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RolloutArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    #[arg(long, value_name = "OPERATOR")]
    pub from: String,
    #[arg(long, value_name = "OPERATOR")]
    pub to: String,
    /// Cumulative steps, counts or percentages (default: the manifest's rollout.steps).
    #[arg(long, value_delimiter = ',', value_name = "STEPS")]
    pub steps: Vec<String>,
    /// Only resources whose labels match (kubectl syntax: app=x,tier in (a,b)).
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    pub selector: Option<String>,
}

#[derive(Args, Debug)]
pub struct RevertArgs {
    #[command(flatten)]
    pub edit: EditArgs,
    /// The commit whose change of the manifest to undo (a merge commit: its
    /// change against its first parent). Lines it changed that were changed
    /// again since are a conflict: named, and nothing is written.
    #[arg(value_name = "REV")]
    pub rev: String,
}

/// The long help of `strip-owner-keys`: what it edits, and the output
/// format scripts and tests read (one row per resource, its verdict last).
const STRIP_OWNER_KEYS_HELP: &str = "\
Remove the owner keys from the Camel K manifests a GitOps tool applies (Flux,
Argo CD, kubectl apply), so that it stops setting them back over the
reconciler's moves.

Every .yaml and .yml file under each PATH is read (folders recursively; .git,
files Git ignores and the templates/ of Helm charts are skipped; symbolic links
are not followed, and one leading outside the repository is refused). Each
document whose apiVersion is in camel.apache.org (and each such item of a
`kind: List`) loses camel.apache.org/operator.id from metadata.labels (a map
left empty goes with its key), and in metadata.annotations the key gives its
line to the marker `camelk.dev/owner-keys: reconciler` (added after the last
annotation when only the label named the operator). The marker tells people
the keys are the reconciler's, and makes the manifest differ from the live
object, so the tool applies it once and drops its claim on the key (Flux
applies only what drifted). Only those lines change: comments, quoting and key
order stay byte for byte. A file that is not
YAML is an error naming file:line:column (a Helm template: a warning), and is
left untouched; places that still name the key (a Kustomization's
commonAnnotations, a patch) are warnings.

The keys may leave Git once the reconciler co-owns them in the cluster (within
a round of `reconciler sync`, it applies both server-side as camelk-owner-keys):
the API server then keeps them when the tool stops applying them. So each
resource is read from the cluster (--kubeconfig, --context; a manifest without
a namespace: -n, else the context's) and shown in one row:

  FILE:LINE  KIND  NAMESPACE  NAME  REMOVED  OWNER  APPLIED BY  CO-OWNED  VERDICT

REMOVED is `label=VALUE annotation=VALUE` (the keys taken out of Git); OWNER the
live owner by the owner rule; VERDICT, the last column, one of:

  stays with OPERATOR           its keys stay: co-owned, applied by no tool, or
                                kept by the owner-keys policy
  would lose its owner: REASON  the tool's next apply removes them: not co-owned
                                yet, or applied client-side (deleted even when
                                co-owned)
  not in the cluster            nothing to lose
  has no owner in the cluster   nothing to lose
  not checked                   --no-cluster

The last line is `N keys removed from M files; K resources change owner` (K:
the resources that would lose their owner; `owners not checked` with
--no-cluster). When K is not 0, nothing is written and the exit code is 1,
unless --force. A cluster that cannot be read is an error: --no-cluster skips
the check. -o json|yaml prints the same as one document (`resources[].verdict`:
stays, losesOwner, notInCluster, unowned, notChecked).

Then, as `assign`: one commit on a new branch (default
camelk/strip-owner-keys-<HEAD's short SHA>) listing the resources; --push,
--dry-run (the diff and the verdicts, nothing written), --allow-dirty (never
for the files it edits).";

#[derive(Args, Debug)]
pub struct StripOwnerKeysArgs {
    /// Files or folders of the repository to clean.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub record: RecordArgs,
    /// Do not read the cluster: remove the keys without checking that every
    /// resource keeps its owner.
    #[arg(long)]
    pub no_cluster: bool,
    /// Write even when resources would lose their owner.
    #[arg(long, conflicts_with = "no_cluster")]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Actual state from this inventory (`kubectl get ... -o json`) instead of the cluster.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// Plan the change from this revision (actual owners = its manifest).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Desired owners from this revision's manifest (default: the work tree).
    #[arg(long, value_name = "REV")]
    pub head: Option<String>,
    /// Ask the reconciler at this URL for the plan of --base and --head
    /// (`GET /plan`, against its watch cache): no cluster credentials and no
    /// checkout needed. REV: a full commit SHA, a branch or a ref.
    #[arg(
        long,
        value_name = "URL",
        requires = "head",
        conflicts_with = "inventory"
    )]
    pub server: Option<String>,
    /// File holding the plan endpoint's bearer token (default: $CAMELK_PLAN_TOKEN).
    #[arg(long, value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,
    /// With -o markdown: the most bytes the comment may take; rows past it
    /// are left out, and counted in its last line (0: no limit).
    #[arg(long, value_name = "BYTES", default_value_t = 60000)]
    pub max_bytes: usize,
}

#[derive(Args, Debug)]
pub struct MoveArgs {
    /// Resources as KIND/NAME, in the namespace of -n.
    #[arg(required = true, value_name = "KIND/NAME")]
    pub resources: Vec<String>,
    /// The operator to hand them to.
    #[arg(long, value_name = "OPERATOR")]
    pub to: String,
    /// Wait until the handoff ends, showing progress (without it, only the
    /// request is written and the current owner releases on its own).
    #[arg(long)]
    pub wait: bool,
    /// The current owner is a plain upstream Camel K operator: release for
    /// it once each resource is in a stable phase.
    #[arg(long)]
    pub upstream: bool,
    /// How long a live owner may take to release before the move stalls.
    #[arg(long, value_parser = duration, default_value = "5m")]
    pub drain_timeout: Duration,
    /// Take resources over after the drain timeout instead of stalling.
    #[arg(long)]
    pub force: bool,
    /// Namespace of the operators' lock Leases (default: found by name).
    #[arg(long, value_name = "NAMESPACE")]
    pub operator_namespace: Option<String>,
    /// Lease duration of the operators' locks, to judge them alive or dead.
    #[arg(long, value_parser = duration, default_value = "15s")]
    pub lease_duration: Duration,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Only this kind (integration, it, pipe, ...).
    #[arg(value_name = "KIND")]
    pub kind: Option<String>,
    /// Only resources owned by this operator.
    #[arg(long, value_name = "ID")]
    pub operator: Option<String>,
    /// After the list, a row each time a resource's owner or phase changes, until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

#[derive(Args, Debug)]
pub struct OperatorsArgs {
    /// How long to watch the locks for renewals.
    #[arg(long, value_parser = duration, default_value = "3s")]
    pub observe: Duration,
}

#[derive(Args, Debug)]
pub struct EventsArgs {
    /// After the list, print each new Event as it is recorded, until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Only the Events about this object (KIND/NAME, e.g. integration/orders).
    #[arg(long = "for", value_name = "KIND/NAME")]
    pub for_: Option<String>,
}

#[derive(Args, Debug)]
pub struct VersionArgs {
    /// Only this plugin's version; do not connect to the cluster.
    #[arg(long)]
    pub client: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// How long to watch the locks for renewals (a holder renews every few seconds).
    #[arg(long, value_parser = duration, default_value = "5s")]
    pub observe: Duration,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The OperatorAssignment (default: every one in the namespace).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// After the status, print it again each time it changes, until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The OperatorAssignment (default: every one in the namespace).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// List the moves of this revision's migration (a commit SHA or a prefix
    /// of it), from the Moved Events on the moved resources.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
}

#[derive(Args, Debug)]
pub struct NameArgs {
    /// The OperatorAssignment (default: every one in the namespace).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// The OperatorAssignment (default: the only one in the namespace).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// The step to approve (from 1): the one the rollout waits on.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub step: u32,
    /// The revision (a commit SHA or its prefix) you approve; refused unless
    /// it is the one rolling out.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
}

#[derive(Args, Debug)]
pub struct SyncArgs {
    /// The OperatorAssignment (default: every one in the namespace).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Follow the sync until the reconciler has handled it; exit 1 if it
    /// ends stalled or failed.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, value_parser = duration, default_value = "10m")]
    pub timeout: Duration,
}

/// Parses `KIND/NAME` as kubectl does (`integration/orders`, `it/orders`):
/// the one parser of every command's resource arguments. An empty kind or
/// name is refused.
pub fn parse_resource(text: &str) -> anyhow::Result<(CamelKind, String)> {
    let (kind, name) = text
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        .with_context(|| format!("`{text}`: expected KIND/NAME, e.g. integration/orders"))?;
    let kind = CamelKind::parse(kind).with_context(|| {
        format!(
            "`{text}`: `{kind}` is not a Camel K kind{} (kinds: {})",
            CamelKind::closest(kind)
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default(),
            CamelKind::ALL.map(CamelKind::kind).join(", ")
        )
    })?;
    Ok((kind, name.to_string()))
}

/// Durations of `--drain-timeout`, `--lease-duration`, `--observe` and
/// `--timeout`, written as Kubernetes writes them (`500ms`, `5s`, `1.5h`).
pub fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration (like 500ms, 5s, 2m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_parser_refuses_an_empty_kind_or_name_and_names_the_closest_kind() {
        assert_eq!(
            parse_resource("it/orders").unwrap(),
            (CamelKind::Integration, "orders".to_string())
        );
        for bad in ["integration/", "/orders", "orders"] {
            let e = parse_resource(bad).unwrap_err().to_string();
            assert!(e.contains("expected KIND/NAME"), "{bad}: {e}");
        }
        let e = parse_resource("integrashun/orders")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `Integration`?"), "{e}");
    }

    #[test]
    fn durations_as_kubernetes_writes_them_and_a_clear_refusal() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            duration("soon"),
            Err("`soon` is not a duration (like 500ms, 5s, 2m)".to_string())
        );
        let cli =
            Cli::try_parse_from(["kubectl-camelk", "sync", "--wait", "--timeout", "90s"]).unwrap();
        let Command::Sync(args) = cli.command else {
            panic!("parsed as {:?}", cli.command)
        };
        assert_eq!(args.timeout, Duration::from_secs(90));
        let refused = Cli::try_parse_from(["kubectl-camelk", "operators", "--observe", "x"])
            .unwrap_err()
            .to_string();
        assert!(refused.contains("`x` is not a duration"), "{refused}");
    }

    fn connects(args: &[&str]) -> bool {
        let argv = std::iter::once("kubectl-camelk").chain(args.iter().copied());
        Cli::try_parse_from(argv).unwrap().command.connects()
    }

    /// Commands that connect keep the system CA bundle (see `main`); the
    /// rest skip loading it.
    #[test]
    fn only_pushes_and_cluster_reads_connect() {
        assert!(!connects(&["validate"]));
        assert!(!connects(&["init", "--operator", "op=ns"]));
        // An edit plans against the cluster, unless given an inventory.
        assert!(connects(&["assign", "it/a", "--to", "op"]));
        assert!(!connects(&[
            "assign",
            "it/a",
            "--to",
            "op",
            "--inventory",
            "i"
        ]));
        assert!(connects(&[
            "assign",
            "it/a",
            "--to",
            "op",
            "--inventory",
            "i",
            "--push"
        ]));
        assert!(connects(&["rollout", "--from", "a", "--to", "b"]));
        assert!(connects(&["revert", "HEAD~1"]));
        assert!(!connects(&["revert", "HEAD~1", "--inventory", "i"]));
        assert!(connects(&["revert", "HEAD~1", "--push"]));
        assert!(!connects(&["plan", "--inventory", "inv.json"]));
        assert!(connects(&["plan"]));
        assert!(connects(&["diff", "--base", "main"]));
        assert!(connects(&["get"]));
        assert!(connects(&["strip-owner-keys", "apps"]));
        assert!(!connects(&["strip-owner-keys", "apps", "--no-cluster"]));
        assert!(connects(&[
            "strip-owner-keys",
            "apps",
            "--no-cluster",
            "--push"
        ]));
    }
}
