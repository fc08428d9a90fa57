//! A Git smart-HTTP server on loopback for tests: Git's own CGI
//! (`git http-backend`) behind a minimal HTTP/1.1 front end that demands
//! Basic authentication, as a Git host does. The expected password can be
//! changed while it runs ([`GitHttpServer::set_password`]), to test
//! credential rotation.
//!
//! [`GitHttpServer::start_tls`] serves HTTPS instead, with a certificate
//! signed by a fresh CA that a client trusts only when told to (for libgit2:
//! `SSL_CERT_FILE`).
//!
//! One request per connection (`Connection: close`); each connection is
//! served on its own thread; the server lives until the test process ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::pki::Serving;

/// A running server of the bare repositories under a directory.
pub struct GitHttpServer {
    port: u16,
    state: Arc<State>,
    /// The CA that signed the HTTPS certificate (PEM); `None` for plain HTTP.
    ca_cert: Option<String>,
}

struct State {
    root: PathBuf,
    user: String,
    password: Mutex<String>,
    refused: AtomicUsize,
}

impl GitHttpServer {
    /// Serves the repositories under `root` (`<root>/<name>.git`) to `user`
    /// with `password`.
    pub fn start(root: &Path, user: &str, password: &str) -> GitHttpServer {
        Self::listen(root, user, password, None)
    }

    /// [`start`](Self::start), over HTTPS: the certificate is valid for
    /// `127.0.0.1` and `localhost`, signed by the CA of [`ca_cert`](Self::ca_cert).
    pub fn start_tls(root: &Path, user: &str, password: &str) -> GitHttpServer {
        let serving = Serving::generate("camelk-git-test-ca", "git", &["127.0.0.1", "localhost"])
            .expect("a serving certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(serving.key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(serving.cert_der)], key)
        .expect("a TLS configuration");
        let mut server = Self::listen(root, user, password, Some(Arc::new(config)));
        server.ca_cert = Some(serving.ca_cert);
        server
    }

    fn listen(
        root: &Path,
        user: &str,
        password: &str,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> GitHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the Git HTTP server");
        let port = listener.local_addr().expect("its address").port();
        let state = Arc::new(State {
            root: root.to_path_buf(),
            user: user.to_string(),
            password: Mutex::new(password.to_string()),
            refused: AtomicUsize::new(0),
        });
        let serving = state.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let state = serving.clone();
                let tls = tls.clone();
                std::thread::spawn(move || match tls {
                    None => {
                        let _ = serve(&mut stream, &state);
                    }
                    Some(config) => {
                        let Ok(connection) = rustls::ServerConnection::new(config) else {
                            return;
                        };
                        let mut tls = rustls::StreamOwned::new(connection, stream);
                        if serve(&mut tls, &state).is_ok() {
                            tls.conn.send_close_notify();
                            let _ = tls.flush();
                        }
                    }
                });
            }
        });
        GitHttpServer {
            port,
            state,
            ca_cert: None,
        }
    }

    /// `http://127.0.0.1:<port>/<path>`, or `https://` when serving TLS.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.ca_cert.is_some() {
            "https"
        } else {
            "http"
        };
        format!(
            "{scheme}://127.0.0.1:{}/{}",
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// The PEM of the CA a client must trust, when serving HTTPS.
    pub fn ca_cert(&self) -> Option<&str> {
        self.ca_cert.as_deref()
    }

    /// From now on only `password` is accepted.
    pub fn set_password(&self, password: &str) {
        *self.state.password.lock().unwrap() = password.to_string();
    }

    /// How many requests were refused for missing or wrong credentials.
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::Relaxed)
    }
}

fn serve(stream: &mut (impl Read + Write), state: &State) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line)? == 0 {
        return Ok(()); // closed without a request (say, after a refused certificate)
    }
    let mut words = request_line.split_whitespace();
    let (method, target) = (
        words.next().unwrap_or_default().to_string(),
        words.next().unwrap_or_default().to_string(),
    );
    let mut headers: Vec<(String, String)> = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let body = read_body(
        &mut reader,
        header("transfer-encoding"),
        header("content-length"),
    )?;
    // The whole request is read: nothing is left in the buffer.
    let out = reader.get_mut();
    let expected = basic_authorization(&state.user, &state.password.lock().unwrap());
    if header("authorization") != Some(expected.as_str()) {
        state.refused.fetch_add(1, Ordering::Relaxed);
        return out.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    let mut cgi = Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &state.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", &state.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    cgi.stdin.take().expect("piped stdin").write_all(&body)?;
    let output = cgi.wait_with_output()?;
    let (cgi_head, cgi_body) = split_cgi(&output.stdout);
    let mut status = "200 OK".to_string();
    let mut response_headers = String::new();
    for line in cgi_head.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                status = value.trim().to_string();
            }
            Some(_) => {
                response_headers.push_str(line);
                response_headers.push_str("\r\n");
            }
            None => {}
        }
    }
    out.write_all(
        format!(
            "HTTP/1.1 {status}\r\n{response_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            cgi_body.len()
        )
        .as_bytes(),
    )?;
    out.write_all(cgi_body)
}

fn read_body(
    reader: &mut impl BufRead,
    transfer_encoding: Option<&str>,
    content_length: Option<&str>,
) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    if transfer_encoding.is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            let size =
                usize::from_str_radix(size_line.trim().split(';').next().unwrap_or_default(), 16)
                    .unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                return Ok(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    if let Some(length) = content_length.and_then(|l| l.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(body)
}

/// CGI output: headers, a blank line (CRLF or LF), the body.
fn split_cgi(stdout: &[u8]) -> (String, &[u8]) {
    let at = |separator: &[u8]| {
        stdout
            .windows(separator.len())
            .position(|w| w == separator)
            .map(|i| (i, i + separator.len()))
    };
    let (head_end, body_start) = at(b"\r\n\r\n").or_else(|| at(b"\n\n")).unwrap_or((0, 0));
    (
        String::from_utf8_lossy(&stdout[..head_end]).into_owned(),
        &stdout[body_start..],
    )
}

/// The `Authorization` header value of HTTP Basic authentication (RFC 7617).
fn basic_authorization(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let credentials = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn basic_authorization_is_padded_base64_of_user_colon_password() {
        use super::basic_authorization;
        assert_eq!(
            basic_authorization("x-access-token", "t"),
            "Basic eC1hY2Nlc3MtdG9rZW46dA=="
        );
        assert_eq!(basic_authorization("ab", "cd"), "Basic YWI6Y2Q=");
        assert_eq!(basic_authorization("a", "c"), "Basic YTpj");
    }
}
