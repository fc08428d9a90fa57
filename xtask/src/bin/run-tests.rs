//! `run-tests`: every test of the workspace, as `cargo test --workspace
//! --no-fail-fast` runs them, with several test binaries at once.
//!
//! Most of `make test`'s time is spent waiting: on a control plane coming
//! up, an operator acting, a Lease expiring. One binary after another leaves
//! the two cores of this machine idle for most of it; a few at once keep
//! them busy. Each binary still runs its own tests as cargo would (same
//! working directory, environment and arguments), so tests that share a
//! control plane inside a binary keep sharing it.
//!
//! Order: longest first, by the times of the last run (kept in
//! `$CARGO_TARGET_DIR/test-times.tsv`), so the long binaries don't start
//! last. A run given test arguments (a filter) runs part of each binary and
//! keeps the times as they were: one test's 9 s once put the 4-minute
//! `reconciler` `e2e` binary last in the next whole run, which took 9.0 min
//! instead of 6.6 to 6.9. Each binary's output goes to `$CARGO_TARGET_DIR/test-logs/`; a
//! failed binary's is printed whole when it ends. Exit code 1 when any test
//! failed, 2 when the build did.
//!
//! `--also NAME=COMMAND` runs a command of its own (`sh -c`) as one more
//! job beside the binaries: `make test` runs the fuzz smoke so.
//!
//! ```text
//! run-tests [--jobs N] [--only NAME,...] [--also NAME=COMMAND]... [-- ARGS FOR EACH BINARY]
//! ```

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Runs every test binary of the workspace, several at once")]
struct Args {
    /// Test binaries run at once.
    #[arg(long, default_value_t = 3)]
    jobs: usize,
    /// Only the binaries whose name (`package::target`) contains one of
    /// these words.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// A command run beside the binaries as one more job, `NAME=COMMAND`
    /// (through `sh -c`, in the working directory).
    #[arg(long, value_name = "NAME=COMMAND", value_parser = also_job)]
    also: Vec<(String, String)>,
    /// Arguments for each test binary (a filter, `--nocapture`, ...).
    #[arg(last = true)]
    test_args: Vec<String>,
}

/// A test binary cargo built.
#[derive(Clone, Debug)]
struct Binary {
    /// `package::target`, `workspace::doc` for the doc tests, or the name
    /// of an `--also` command.
    name: String,
    /// What runs it: the executable, or cargo for the doc tests.
    program: PathBuf,
    args: Vec<String>,
    /// The package's directory: cargo runs its tests there.
    dir: PathBuf,
    /// The package of a test binary; `None` for a command cargo runs or
    /// an `--also` one.
    package: Option<String>,
}

/// How a binary's run ended.
struct Ran {
    binary: Binary,
    took: Duration,
    passed: bool,
    counts: Counts,
    log: PathBuf,
}

/// What the binary's `test result:` lines add up to.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    passed: u64,
    failed: u64,
    ignored: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("run-tests: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<bool> {
    let cargo = std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from);
    let target = target_dir(&cargo)?;
    let mut binaries = build(&cargo, &args.test_args)?;
    if !args.only.is_empty() {
        binaries.retain(|b| args.only.iter().any(|w| b.name.contains(w.as_str())));
    }
    let here = std::env::current_dir().context("the working directory")?;
    for (name, command) in &args.also {
        binaries.push(Binary {
            name: name.clone(),
            program: PathBuf::from("sh"),
            args: vec!["-c".into(), command.clone()],
            dir: here.clone(),
            package: None,
        });
    }
    let times_file = target.join("test-times.tsv");
    let mut times = read_times(&times_file);
    // Longest first; one never timed counts as long, so it is timed early.
    binaries
        .sort_by_key(|b| std::cmp::Reverse(times.get(&b.name).copied().unwrap_or(Duration::MAX)));
    let logs = target.join("test-logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;

    let started = Instant::now();
    let total = binaries.len();
    eprintln!("run-tests: {total} jobs, {} at once", args.jobs.max(1));
    let (done_tx, done_rx) = mpsc::channel::<Ran>();
    let mut queue = binaries.into_iter();
    let mut running = 0;
    let mut results = Vec::new();
    loop {
        while running < args.jobs.max(1) {
            let Some(binary) = queue.next() else { break };
            let tx = done_tx.clone();
            let log = logs.join(format!("{}.log", binary.name.replace("::", "-")));
            let cargo = cargo.clone();
            std::thread::spawn(move || {
                let _ = tx.send(run_one(binary, log, &cargo));
            });
            running += 1;
        }
        if running == 0 {
            break;
        }
        let ran = done_rx.recv().context("a test runner thread died")?;
        running -= 1;
        report(&ran, results.len() + 1, total);
        times.insert(ran.binary.name.clone(), ran.took);
        results.push(ran);
    }
    if args.test_args.is_empty() {
        write_times(&times_file, &times);
    }
    Ok(summary(&results, started.elapsed()))
}

/// `NAME=COMMAND` of `--also`.
fn also_job(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, command)) if !name.is_empty() && !command.trim().is_empty() => {
            Ok((name.to_string(), command.to_string()))
        }
        _ => Err(format!("expected NAME=COMMAND, got {text:?}")),
    }
}

/// The target directory cargo builds into.
fn target_dir(cargo: &Path) -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let out = Command::new(cargo)
        .args(["metadata", "--format-version=1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading cargo metadata")?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata names no target directory")
}

/// Builds every test target (`cargo test --workspace --no-run`) and returns
/// the binaries, with the doc tests as one more.
fn build(cargo: &Path, test_args: &[String]) -> Result<Vec<Binary>> {
    let mut child = Command::new(cargo)
        .args([
            "test",
            "--workspace",
            "--locked",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .context("running cargo test --no-run")?;
    let stdout = child.stdout.take().context("cargo's output")?;
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's output")?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(binary) = test_binary(&message, test_args) {
            binaries.push(binary);
        }
    }
    if !child.wait().context("waiting for cargo")?.success() {
        bail!("cargo test --no-run failed (above)");
    }
    // The doc tests, as `cargo test --workspace` runs them after the rest.
    let mut doc_args = vec![
        "test".to_string(),
        "--workspace".into(),
        "--locked".into(),
        "--doc".into(),
    ];
    if !test_args.is_empty() {
        doc_args.push("--".into());
        doc_args.extend(test_args.iter().cloned());
    }
    binaries.push(Binary {
        name: "workspace::doc".into(),
        program: cargo.to_path_buf(),
        args: doc_args,
        dir: std::env::current_dir().context("the working directory")?,
        package: None,
    });
    Ok(binaries)
}

/// The test binary a `compiler-artifact` message names, if it is one.
fn test_binary(message: &serde_json::Value, test_args: &[String]) -> Option<Binary> {
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = message["executable"].as_str()?;
    let manifest = Path::new(message["manifest_path"].as_str()?);
    let package = package_name(message["package_id"].as_str()?);
    let target = message["target"]["name"].as_str()?;
    let kind = message["target"]["kind"][0].as_str().unwrap_or("test");
    // A library's or a binary's own unit tests are named by their kind.
    let name = match kind {
        "test" | "bench" | "example" => format!("{package}::{target}"),
        other => format!("{package}::{other}:{target}"),
    };
    Some(Binary {
        name,
        program: PathBuf::from(executable),
        args: test_args.to_vec(),
        dir: manifest.parent()?.to_path_buf(),
        package: Some(package),
    })
}

/// The package's name in a cargo package id (`path+file:///x/name#0.1.0`,
/// `path+file:///x/dir#name@0.1.0`, or the older `name 0.1.0 (path+...)`).
fn package_name(id: &str) -> String {
    if let Some((url, fragment)) = id.split_once('#') {
        return match fragment.split_once('@') {
            Some((name, _)) => name.to_string(),
            None => url.rsplit('/').next().unwrap_or(url).to_string(),
        };
    }
    id.split(' ').next().unwrap_or(id).to_string()
}

/// Runs one binary as cargo would, its output into `log`.
fn run_one(binary: Binary, log: PathBuf, cargo: &Path) -> Ran {
    let started = Instant::now();
    let status = std::fs::File::create(&log).and_then(|file| {
        let err = file.try_clone()?;
        let mut command = Command::new(&binary.program);
        command
            .args(&binary.args)
            .current_dir(&binary.dir)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err);
        // A test binary gets what cargo test gives it; a command of
        // `--also` runs as it would from a shell.
        if let Some(package) = &binary.package {
            command
                .env("CARGO", cargo)
                .env("CARGO_MANIFEST_DIR", &binary.dir)
                .env("CARGO_PKG_NAME", package);
        }
        command.status()
    });
    let took = started.elapsed();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let counts = counts(&text);
    let passed = match status {
        Ok(status) => status.success(),
        Err(e) => {
            let _ = std::fs::OpenOptions::new()
                .append(true)
                .open(&log)
                .and_then(|mut f| writeln!(f, "run-tests: could not run: {e}"));
            false
        }
    };
    Ran {
        binary,
        took,
        passed,
        counts,
        log,
    }
}

/// Adds up the `test result:` lines of a test binary's output.
fn counts(output: &str) -> Counts {
    let mut total = Counts::default();
    for line in output.lines() {
        let Some(rest) = line.strip_prefix("test result: ") else {
            continue;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => total.passed += n,
                "failed" => total.failed += n,
                "ignored" => total.ignored += n,
                _ => {}
            }
        }
    }
    total
}

/// One line a binary as it ends; a failed one's whole output after it.
fn report(ran: &Ran, index: usize, total: usize) {
    let verdict = if ran.passed { "ok  " } else { "FAIL" };
    eprintln!(
        "run-tests: [{index}/{total}] {verdict} {} ({} passed, {} failed) in {}",
        ran.binary.name,
        ran.counts.passed,
        ran.counts.failed,
        minutes(ran.took)
    );
    if !ran.passed {
        eprintln!("---- output of {} ----", ran.binary.name);
        if let Ok(text) = std::fs::read_to_string(&ran.log) {
            eprint!("{text}");
        }
        eprintln!("---- end of {} ----", ran.binary.name);
    }
}

/// The table of every binary, longest first; whether all passed.
fn summary(results: &[Ran], took: Duration) -> bool {
    let mut sorted: Vec<&Ran> = results.iter().collect();
    sorted.sort_by_key(|r| std::cmp::Reverse(r.took));
    eprintln!("run-tests: times, longest first:");
    for r in &sorted {
        eprintln!(
            "  {:>7}  {:<4} {:>4} tests  {}",
            minutes(r.took),
            if r.passed { "ok" } else { "FAIL" },
            r.counts.passed + r.counts.failed,
            r.binary.name
        );
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.binary.name.as_str())
        .collect();
    let passed: u64 = results.iter().map(|r| r.counts.passed).sum();
    let failures: u64 = results.iter().map(|r| r.counts.failed).sum();
    eprintln!(
        "run-tests: {passed} passed, {failures} failed, {} binaries in {}",
        results.len(),
        minutes(took)
    );
    if !failed.is_empty() {
        eprintln!("run-tests: failed: {}", failed.join(", "));
    }
    failed.is_empty()
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:04.1}s", (s / 60.0).floor(), s % 60.0)
    }
}

fn read_times(path: &Path) -> BTreeMap<String, Duration> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, secs) = l.split_once('\t')?;
            Some((
                name.to_string(),
                Duration::from_secs_f64(secs.parse().ok()?),
            ))
        })
        .collect()
}

fn write_times(path: &Path, times: &BTreeMap<String, Duration>) {
    let text: String = times
        .iter()
        .map(|(name, d)| format!("{name}\t{:.1}\n", d.as_secs_f64()))
        .collect();
    if let Err(e) = std::fs::write(path, text) {
        eprintln!(
            "run-tests: could not keep the times in {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_add_up() {
        let out = "running 3 tests\ntest a ... ok\n\ntest result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n\
                   test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.00s\n";
        assert_eq!(
            counts(out),
            Counts {
                passed: 5,
                failed: 1,
                ignored: 1
            }
        );
        assert_eq!(counts("no tests here"), Counts::default());
    }

    #[test]
    fn an_extra_job_is_a_name_and_a_command() {
        assert_eq!(
            also_job("fuzz-smoke=make fuzz-smoke FUZZ_SECONDS=30"),
            Ok((
                "fuzz-smoke".into(),
                "make fuzz-smoke FUZZ_SECONDS=30".into()
            ))
        );
        assert!(also_job("no-command=").is_err());
        assert!(also_job("=make").is_err());
        assert!(also_job("make").is_err());
    }

    #[test]
    fn package_names_in_each_id_form() {
        assert_eq!(
            package_name("path+file:///w/reconciler#camelk-reconciler@0.9.0"),
            "camelk-reconciler"
        );
        assert_eq!(package_name("path+file:///w/xtask#0.9.0"), "xtask");
        assert_eq!(package_name("xtask 0.9.0 (path+file:///w/xtask)"), "xtask");
    }

    #[test]
    fn times_survive_a_round_trip() {
        let dir = std::env::temp_dir().join(format!("run-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("times.tsv");
        let times: BTreeMap<String, Duration> =
            [("a::e2e".to_string(), Duration::from_secs_f64(12.5))].into();
        write_times(&file, &times);
        assert_eq!(read_times(&file), times);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
