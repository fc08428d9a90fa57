//! Processes a test starts die with the test process, however it ends.
//!
//! Rust never runs the destructors of statics, and a killed process runs
//! none at all, so a watchdog shell holds the read end of a pipe whose write
//! end only this process holds: when this process exits in any way, the pipe
//! closes and the watchdog acts.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::cluster::ClusterDir;

/// Stops the processes of a control plane's pids file and removes the
/// directories given as arguments (unless `$KEEP`). The pids are read at
/// exit, not at start, so a process restarted by a fault test
/// ([`crate::cluster::restart`]) is stopped too; a pid whose command line no
/// longer names the directory is another process's and is left alone.
const STOP_CLUSTER: &str = r#"read _ignored
pids=
if [ -f "$STATE_DIR/pids" ]; then
  while read -r _name pid; do
    grep -qaF "$STATE_DIR" "/proc/$pid/cmdline" 2>/dev/null && pids="$pid $pids"
  done < "$STATE_DIR/pids"
fi
if [ -n "$pids" ]; then
  kill -TERM $pids 2>/dev/null; sleep 5; kill -KILL $pids 2>/dev/null
fi
[ -n "$KEEP" ] || rm -rf "$@""#;

/// Kills `child` (SIGKILL), reaps it, then retires its `watchdog`: once
/// reaped, its pid is free, and a watchdog left would kill whoever takes it.
pub fn kill_and_reap(child: &mut Child, watchdog: &mut Option<Watchdog>) {
    let _ = child.kill();
    let _ = child.wait();
    if let Some(watchdog) = watchdog.take() {
        watchdog.retire();
    }
}

/// A watchdog shell; it acts when this process exits, or when dropped.
pub struct Watchdog {
    child: Child,
    // Held, never written: closing it is the signal.
    _pipe: ChildStdin,
}

impl Watchdog {
    /// Kills `pid` (SIGKILL) once this process exits.
    pub fn kill_on_exit(pid: u32) -> io::Result<Watchdog> {
        Watchdog::spawn(
            Command::new("sh")
                .arg("-c")
                .arg("read _ignored; kill -KILL \"$1\" 2>/dev/null")
                .arg("camelk-process-watchdog")
                .arg(pid.to_string()),
        )
    }

    /// Stops the control plane in `dir` once this process exits, then
    /// removes the directories `remove`; `keep` leaves them.
    pub fn stop_cluster_on_exit(
        dir: &ClusterDir,
        remove: &[&Path],
        keep: bool,
    ) -> io::Result<Watchdog> {
        Watchdog::spawn(
            Command::new("sh")
                .arg("-c")
                .arg(STOP_CLUSTER)
                .arg("camelk-cluster-watchdog")
                .args(remove)
                .env("STATE_DIR", dir.root())
                .env("KEEP", if keep { "1" } else { "" }),
        )
    }

    /// Stands the watchdog down without letting it act: for a process already
    /// killed and reaped, whose pid another process may take.
    pub fn retire(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn spawn(command: &mut Command) -> io::Result<Watchdog> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the terminal's process group: a Ctrl-C reaches the test,
            // whose exit then wakes the watchdog, not the watchdog itself.
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take().expect("piped stdin");
        Ok(Watchdog { child, _pipe: pipe })
    }
}
