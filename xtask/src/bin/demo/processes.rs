//! The demo's own processes: the `reconciler` and `kubectl-camelk` binaries it
//! runs, found next to its own, and the reconciler's metrics endpoint.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

pub(crate) struct Binaries {
    pub(crate) reconciler: PathBuf,
    pub(crate) kubectl_camelk: PathBuf,
}

/// `reconciler` and `kubectl-camelk`, built next to this binary by `make demo`.
pub(crate) fn binaries() -> anyhow::Result<Binaries> {
    let exe = std::env::current_exe().context("locating the demo binary")?;
    let dir = exe.parent().context("the demo binary has no directory")?;
    let find = |name: &str| {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            bail!(
                "{} not found; run the demo with `make demo`, which builds it",
                path.display()
            )
        }
    };
    Ok(Binaries {
        reconciler: find("reconciler")?,
        kubectl_camelk: find("kubectl-camelk")?,
    })
}

pub(crate) fn spawn(
    bin: &Path,
    log: &Path,
    args: &[&str],
    kubeconfig: &Path,
) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    Command::new(bin)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Runs a command with its output on the terminal.
pub(crate) fn run_shown(bin: &Path, args: &[&str], kubeconfig: &Path) -> anyhow::Result<()> {
    let status = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .status()
        .with_context(|| format!("running {}", bin.display()))?;
    // `plan` exits 1 when there are changes, as `kubectl diff` does.
    if status.code().is_none_or(|c| c > 1) {
        bail!("{} {} failed: {status}", bin.display(), args.join(" "));
    }
    Ok(())
}

/// `GET /metrics` of the reconciler, over plain HTTP/1.1.
pub(crate) fn metrics(port: u16) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default())
}
