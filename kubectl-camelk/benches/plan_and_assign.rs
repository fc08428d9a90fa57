//! Benchmarks of issue 4 (run: `cargo bench -p kubectl-camelk --bench plan_and_assign`):
//!
//! 1. `plan` of 100,000 resources against 50 rules (target: under one second),
//!    next to the time to parse the inventory alone, both in this process and
//!    through the release `kubectl-camelk` binary;
//! 2. `kubectl camelk assign` on a manifest with 10,000 pins (target: under
//!    100 ms without push), next to `git commit` of the same edit, and the
//!    same edit in process through each YAML engine (the splice the binary
//!    takes, and yaml-edit alone; `camelk-reconciler`'s `yaml_engines` bench
//!    compares them in detail).
//!
//! Inputs are generated deterministically; each figure is the median of
//! several runs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use camelk_reconciler::api::OperatorId;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::inventory::{self, ResourceRef};
use camelk_reconciler::manifest::{Manifest, edit};
use camelk_reconciler::plan::{self, Actual};

const RESOURCES: usize = 100_000;
const RULES: usize = 50;
const PINS: usize = 10_000;
const RUNS: usize = 7;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The P7 manifest, shared with `camelk-reconciler`'s `yaml_engines` bench.
#[path = "../../reconciler/benches/common/p7_manifest.rs"]
mod p7_manifest;

use p7_manifest::NAMESPACES;

fn inventory_json(n: usize) -> String {
    let kinds = ["Integration", "Pipe", "IntegrationKit", "Build"];
    let phases = ["Running", "Ready", "Building Kit", "Succeeded", "Error"];
    let mut out = String::from("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n");
    for i in 0..n {
        if i > 0 {
            out.push_str(",\n");
        }
        let owner = 1 + i % 4;
        out.push_str(&format!(
            "{{\"apiVersion\":\"camel.apache.org/v1\",\"kind\":\"{}\",\"metadata\":{{\"name\":\"app-{}-{i}\",\"namespace\":\"ns-{}\",\
             \"labels\":{{\"camel.apache.org/operator.id\":\"operator-{owner}\",\"team\":\"team-{}\",\"tier\":\"tier-{}\"}},\
             \"annotations\":{{\"camel.apache.org/operator.id\":\"operator-{owner}\"}}}},\"spec\":{{}},\"status\":{{\"phase\":\"{}\"}}}}",
            kinds[i % kinds.len()],
            i % 97,
            i % NAMESPACES,
            i % 61,
            i % 53,
            phases[i % phases.len()]
        ));
    }
    out.push_str("\n]}\n");
    out
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

fn main() {
    let binary = env!("CARGO_BIN_EXE_kubectl-camelk");
    let dir = tempfile::tempdir().unwrap();

    // 1. plan: 100,000 resources, 50 rules.
    let manifest_text = p7_manifest::manifest(0, RULES);
    let manifest = Manifest::parse("bench.yaml", manifest_text.clone()).unwrap();
    assert_eq!(manifest.assignment.spec.rules.len(), RULES);
    let json = inventory_json(RESOURCES);
    let inventory = inventory::parse_file("inventory.json", &json).unwrap();
    assert_eq!(inventory.resources.len(), RESOURCES);
    let parse = time(RUNS, || {
        inventory::parse_file("inventory.json", &json).unwrap()
    });
    let planned = plan::plan(&manifest.assignment.spec, Actual::OwnerKeys, &inventory);
    let plan_only = time(RUNS, || {
        plan::plan(&manifest.assignment.spec, Actual::OwnerKeys, &inventory)
    });
    println!("plan: {RESOURCES} resources, {RULES} rules");
    println!(
        "  plan result: {} moves in {} batches, {} blocked, {} unchanged",
        planned.move_count(),
        planned.batches.len(),
        planned.blocked.len(),
        planned.unchanged.total
    );
    println!(
        "  in process: parse inventory {}, plan {}, parse + plan {}",
        ms(parse),
        ms(plan_only),
        ms(parse + plan_only)
    );

    std::fs::write(dir.path().join("bench.yaml"), &manifest_text).unwrap();
    std::fs::write(dir.path().join("inventory.json"), &json).unwrap();
    let cli = |args: &[&str]| {
        let output = Command::new(binary)
            .args(args)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        camelk_testkit::assert_success(&output, &format!("kubectl-camelk {args:?}"));
    };
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "{\"items\":[]}").unwrap();
    let startup = time(RUNS, || {
        cli(&[
            "plan",
            "-f",
            "bench.yaml",
            "--inventory",
            "empty.json",
            "-o",
            "json",
        ])
    });
    let full = time(RUNS, || {
        cli(&[
            "plan",
            "-f",
            "bench.yaml",
            "--inventory",
            "inventory.json",
            "-o",
            "json",
        ])
    });
    let validate = time(RUNS, || cli(&["validate", "-f", "bench.yaml"]));
    println!(
        "  binary: `plan --inventory` (100,000) {}, same with an empty inventory {}, `validate` {}",
        ms(full),
        ms(startup),
        ms(validate)
    );

    // 2. assign on a manifest with 10,000 pins, next to git commit of the same edit.
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Bench"]);
    git(&repo, &["config", "user.email", "bench@example.com"]);
    let pinned = p7_manifest::manifest(PINS, RULES);
    std::fs::write(repo.join("operator-assignment.yaml"), &pinned).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "pins"]);

    let big = Manifest::parse("operator-assignment.yaml", pinned.clone()).unwrap();
    let parse_pins = time(RUNS, || {
        Manifest::parse("operator-assignment.yaml", pinned.clone()).unwrap()
    });
    let target = ResourceRef {
        kind: CamelKind::Integration,
        namespace: "ns-7".into(),
        name: "pinned-7".into(),
    };
    let to = OperatorId::new("operator-2").unwrap();
    let edited = edit::assign(&big, std::slice::from_ref(&target), &to).unwrap();
    let edit_only = time(RUNS, || {
        edit::assign(&big, std::slice::from_ref(&target), &to).unwrap()
    });
    // The same edit through yaml-edit alone (no splice), for the estimate
    // of the binary with one engine below.
    let general = edit::assign_general(&big, std::slice::from_ref(&target), &to).unwrap();
    assert_eq!(general.text, edited.text);
    let general_only = time(RUNS, || {
        edit::assign_general(&big, std::slice::from_ref(&target), &to).unwrap()
    });

    let mut assign_samples = Vec::new();
    let mut commit_samples = Vec::new();
    for run in 0..RUNS {
        git(&repo, &["checkout", "-q", "main"]);
        let start = Instant::now();
        let output = Command::new(binary)
            .args([
                "assign",
                "integration/pinned-7",
                "--to",
                "operator-2",
                "-n",
                "ns-7",
                "--branch",
                &format!("assign-{run}"),
            ])
            // The default output: the diff and the plan table, as a user sees them.
            .env("NO_COLOR", "1")
            // No cluster: the plan is of the named resource, whatever kubeconfig
            // the machine has.
            .env_remove("KUBECONFIG")
            .env("HOME", &repo)
            .current_dir(&repo)
            .output()
            .unwrap();
        assign_samples.push(start.elapsed());
        camelk_testkit::assert_success(&output, "kubectl-camelk assign");

        git(&repo, &["checkout", "-q", "main"]);
        git(&repo, &["checkout", "-q", "-b", &format!("git-{run}")]);
        std::fs::write(repo.join("operator-assignment.yaml"), &edited.text).unwrap();
        let start = Instant::now();
        git(
            &repo,
            &[
                "commit",
                "-q",
                "-a",
                "-m",
                "Assign Integration ns-7/pinned-7 to operator-2",
            ],
        );
        commit_samples.push(start.elapsed());
    }
    println!(
        "assign: manifest with {PINS} pins and {RULES} rules ({} bytes)",
        pinned.len()
    );
    println!(
        "  in process: parse + validate {}, edit (parse, edit, re-validate, guard) {}",
        ms(parse_pins),
        ms(edit_only)
    );
    println!(
        "  in process, the same edit through yaml-edit alone (no splice) {}",
        ms(general_only)
    );
    let assign_binary = median(assign_samples);
    println!(
        "  binary: `kubectl camelk assign` (validate, edit, diff, plan, commit on a branch) {}; `git commit -a` of the same edit {}",
        ms(assign_binary),
        ms(median(commit_samples))
    );
    println!(
        "  estimate of the binary with yaml-edit alone (binary - splice edit + yaml-edit edit): {}",
        ms((assign_binary + general_only).saturating_sub(edit_only))
    );
}
