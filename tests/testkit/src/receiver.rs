//! An HTTP receiver on loopback that records every request and answers
//! `201 Created`: where a test points webhooks, Slack messages and commit
//! status APIs, to see what arrived.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The path, with its query.
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Request {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_default()
    }
}

/// Records what it receives until the process ends.
#[derive(Clone)]
pub struct Receiver {
    port: u16,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Receiver {
    pub fn start() -> std::io::Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let recorded = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let recorded = recorded.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(&stream);
                    if let Some(request) = read_request(&mut reader) {
                        if let Ok(mut seen) = recorded.lock() {
                            seen.push(request);
                        }
                        let _ = (&stream).write_all(
                            b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                        );
                    }
                });
            }
        });
        Ok(Receiver { port, seen })
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits up to `timeout` until `done` holds of the requests so far.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&[Request]) -> bool,
    ) -> Vec<Request> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.requests();
            if done(&seen) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver got no {what} within {timeout:?}; it got: {seen:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
