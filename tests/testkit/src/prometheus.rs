//! A real Prometheus (Debian's `prometheus` package, `scripts/prereqs.sh`) on
//! loopback, scraping every second an exporter whose samples the test sets:
//! a metric analysis is then judged on what Prometheus answers, not on a stub.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const BINARY: &str = "/usr/bin/prometheus";

/// Samples served at `/metrics` in the text format, as the test sets them.
#[derive(Clone)]
pub struct Exporter {
    port: u16,
    lines: Arc<Mutex<String>>,
}

impl Exporter {
    /// Serves nothing yet, on a loopback port, until the process ends.
    pub fn start() -> anyhow::Result<Exporter> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the exporter")?;
        let port = listener.local_addr()?.port();
        let lines = Arc::new(Mutex::new(String::new()));
        let served = lines.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let body = served.lock().map(|b| b.clone()).unwrap_or_default();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Ok(Exporter { port, lines })
    }

    /// Serves `metric{labels} value` for each of `samples` from now on
    /// (labels as written inside the braces: `integration="a",namespace="b"`).
    pub fn set(&self, metric: &str, samples: &[(&str, f64)]) {
        let text: String = samples
            .iter()
            .map(|(labels, value)| format!("{metric}{{{labels}}} {value}\n"))
            .collect();
        if let Ok(mut lines) = self.lines.lock() {
            *lines = text;
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A Prometheus process, killed on drop.
pub struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `exporter` every second; returns once it
    /// is ready and has scraped it once.
    pub fn start(exporter: &Exporter) -> anyhow::Result<Prometheus> {
        if !std::path::Path::new(BINARY).exists() {
            bail!(
                "{BINARY} is missing: install Debian's prometheus package (`sudo scripts/prereqs.sh --install test`)"
            );
        }
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n- job_name: canary\n  static_configs: [{{targets: [\"127.0.0.1:{}\"]}}]\n",
                exporter.port()
            ),
        )?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(dir.path().join("prometheus.log"))?;
        let child = Command::new(BINARY)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {BINARY}"))?;
        let prometheus = Prometheus {
            child,
            port,
            _dir: dir,
        };
        prometheus.wait_scraped()?;
        Ok(prometheus)
    }

    /// Its base URL, as an analysis names it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> PathBuf {
        self._dir.path().join("prometheus.log")
    }

    /// Waits until `up{job="canary"}` is 1: ready, and the exporter scraped.
    fn wait_scraped(&self) -> anyhow::Result<()> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(2)))
            .build()
            .into();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let answer = agent
                .get(format!("{}/api/v1/query", self.url()))
                .query("query", "up{job=\"canary\"} == 1")
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json::<serde_json::Value>().ok());
            if answer.is_some_and(|a| {
                a["data"]["result"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
            }) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "Prometheus did not scrape the exporter within 60 s; its log:\n{}",
                    std::fs::read_to_string(self.log()).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
