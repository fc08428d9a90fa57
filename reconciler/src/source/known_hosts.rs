//! OpenSSH `known_hosts` checking for `ssh://` remotes: the host key the
//! server presents (libgit2 hands it to the certificate check) must be listed
//! for that host, or the fetch stops before any credential is sent.
//!
//! Supported (`sshd(8)`, section SSH_KNOWN_HOSTS FILE FORMAT): comma-separated
//! host patterns with `*` and `?` wildcards and `!` negation, `[host]:port`
//! for a port other than 22, and the `@revoked` marker (a revoked key is
//! refused even when another line lists it). Not supported, and skipped:
//! hashed host names (`|1|salt|hash`, as `ssh-keyscan -H` writes them) and
//! `@cert-authority` lines; an unknown host whose file holds such lines says
//! so in its error.
//!
//! Pure logic: no I/O; the caller reads the file (or the Secret key).

use sha2::{Digest, Sha256};

/// A parsed `known_hosts` file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownHosts {
    entries: Vec<Entry>,
    /// Lines skipped because this parser cannot match them (hashed names,
    /// `@cert-authority`).
    unsupported: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    revoked: bool,
    patterns: Vec<String>,
    key: Vec<u8>,
}

/// Why a presented host key is refused. Host keys are public: the messages
/// name the host and the key's SHA-256 fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostKeyError {
    #[error(
        "host key verification failed: {host} is not in known_hosts (it presented {fingerprint}){}",
        if *.unsupported_lines > 0 {
            format!("; {} hashed or @cert-authority lines were skipped (unsupported): list the host in plain form, as `ssh-keyscan` without -H writes it", .unsupported_lines)
        } else {
            String::new()
        }
    )]
    Unknown {
        host: String,
        fingerprint: String,
        unsupported_lines: usize,
    },
    #[error(
        "host key verification failed: {host} presented {fingerprint}, which is not the key known_hosts lists for it"
    )]
    Mismatch { host: String, fingerprint: String },
    #[error(
        "host key verification failed: the key {fingerprint} of {host} is @revoked in known_hosts"
    )]
    Revoked { host: String, fingerprint: String },
    #[error("the remote presented no SSH host key to check")]
    NoKey,
}

/// A line of `known_hosts` that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("known_hosts line {line}: {message}")]
pub struct KnownHostsError {
    pub line: usize,
    pub message: String,
}

impl KnownHosts {
    /// Parses the text of a `known_hosts` file.
    pub fn parse(text: &str) -> Result<KnownHosts, KnownHostsError> {
        let mut out = KnownHosts::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: &str| KnownHostsError {
                line: i + 1,
                message: message.to_string(),
            };
            let mut fields = line.split_whitespace().peekable();
            let mut revoked = false;
            if let Some(marker) = fields.peek().filter(|f| f.starts_with('@')) {
                match *marker {
                    "@revoked" => revoked = true,
                    "@cert-authority" => {
                        out.unsupported += 1;
                        continue;
                    }
                    _ => return Err(err("unknown marker (expected @revoked or @cert-authority)")),
                }
                fields.next();
            }
            let (Some(hosts), Some(_key_type), Some(key)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(err("expected `hosts key-type base64-key`"));
            };
            if hosts.starts_with('|') {
                out.unsupported += 1;
                continue;
            }
            let key = base64_decode(key).ok_or_else(|| err("the key is not valid base64"))?;
            out.entries.push(Entry {
                revoked,
                patterns: hosts.split(',').map(str::to_ascii_lowercase).collect(),
                key,
            });
        }
        Ok(out)
    }

    /// Whether `key` (the SSH wire encoding of a public key, as libgit2
    /// gives it) is the listed, unrevoked key of `host` on `port`.
    pub fn check(&self, host: &str, port: u16, key: &[u8]) -> Result<(), HostKeyError> {
        let name = if port == 22 {
            host.to_ascii_lowercase()
        } else {
            format!("[{}]:{port}", host.to_ascii_lowercase())
        };
        let applicable: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| entry_matches(&e.patterns, &name))
            .collect();
        let fingerprint = fingerprint(key);
        if applicable.iter().any(|e| e.revoked && e.key == key) {
            return Err(HostKeyError::Revoked {
                host: name,
                fingerprint,
            });
        }
        if applicable.iter().any(|e| !e.revoked && e.key == key) {
            return Ok(());
        }
        if applicable.iter().any(|e| !e.revoked) {
            return Err(HostKeyError::Mismatch {
                host: name,
                fingerprint,
            });
        }
        Err(HostKeyError::Unknown {
            host: name,
            fingerprint,
            unsupported_lines: self.unsupported,
        })
    }
}

/// The port of an SSH remote URL: `ssh://[user@]host[:port]/path` (also
/// `ssh+git://`, `git+ssh://`), or 22 (also for `user@host:path`).
pub fn ssh_port(url: &str) -> u16 {
    let Some((_, rest)) = url.split_once("://") else {
        return 22;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once("]:").map(|(_, p)| p),
        None => host_port.split_once(':').map(|(_, p)| p),
    };
    port.and_then(|p| p.parse().ok()).unwrap_or(22)
}

/// `SHA256:<base64 without padding>`, as `ssh-keygen -l` prints it.
pub fn fingerprint(key: &[u8]) -> String {
    let digest = Sha256::digest(key);
    format!("SHA256:{}", base64_encode(&digest).trim_end_matches('='))
}

fn entry_matches(patterns: &[String], name: &str) -> bool {
    let mut matched = false;
    for pattern in patterns {
        match pattern.strip_prefix('!') {
            Some(negated) if glob(negated.as_bytes(), name.as_bytes()) => return false,
            Some(_) => {}
            None => matched |= glob(pattern.as_bytes(), name.as_bytes()),
        }
    }
    matched
}

/// `*` matches any run of characters, `?` exactly one.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.split_first(), text.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => {
            glob(rest, text) || (!text.is_empty() && glob(pattern, &text[1..]))
        }
        (Some((b'?', rest)), Some((_, text_rest))) => glob(rest, text_rest),
        (Some((p, rest)), Some((t, text_rest))) => p == t && glob(rest, text_rest),
        _ => false,
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.trim_end_matches('=');
    if text.len() - digits.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in digits.bytes() {
        let value = ALPHABET.iter().position(|a| *a == c)? as u32;
        acc = (acc << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if digits.len() % 4 == 1 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two public host keys made with `ssh-keygen -t ed25519` for these tests;
    // `ssh-keygen -l` prints KEY_A's fingerprint as FINGERPRINT_A.
    const KEY_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAICkQcYAiks0LZ7MJHqnWLdjuRzUJY60Sih2m3KGP8ydD";
    const KEY_B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIPdBH466ksg0l07KsPKd4GTEj7WUqMQ1SUi4YcULRX1W";
    const FINGERPRINT_A: &str = "SHA256:ywxmfjN+EyJ5MW/mcuTjqFBjdVkW3Wp9hyC3CV4GQmg";

    fn key(b64: &str) -> Vec<u8> {
        base64_decode(b64).unwrap()
    }

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        for input in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            assert_eq!(base64_decode(&base64_encode(input)).unwrap(), input);
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert!(base64_decode("Zm9v!").is_none());
        assert!(base64_decode("Z===").is_none());
    }

    #[test]
    fn a_listed_key_passes_and_an_unknown_host_or_other_key_fails() {
        let hosts = KnownHosts::parse(&format!(
            "# comment\n\ngit.example.com,10.0.0.1 ssh-ed25519 {KEY_A} ops@example\n"
        ))
        .unwrap();
        assert_eq!(hosts.check("git.example.com", 22, &key(KEY_A)), Ok(()));
        assert_eq!(hosts.check("GIT.example.com", 22, &key(KEY_A)), Ok(()));
        assert_eq!(hosts.check("10.0.0.1", 22, &key(KEY_A)), Ok(()));
        assert!(matches!(
            hosts.check("git.example.com", 22, &key(KEY_B)),
            Err(HostKeyError::Mismatch { .. })
        ));
        let unknown = hosts
            .check("other.example.com", 22, &key(KEY_A))
            .unwrap_err();
        assert!(matches!(unknown, HostKeyError::Unknown { .. }));
        let message = unknown.to_string();
        assert!(
            message.contains("other.example.com is not in known_hosts")
                && message.contains(FINGERPRINT_A),
            "{message}"
        );
        // Port 22 entries do not cover another port.
        assert!(matches!(
            hosts.check("git.example.com", 2222, &key(KEY_A)),
            Err(HostKeyError::Unknown { .. })
        ));
    }

    #[test]
    fn ports_wildcards_negation_and_revocation() {
        let hosts = KnownHosts::parse(&format!(
            "[git.example.com]:2222 ssh-ed25519 {KEY_A}\n\
             *.corp.example,!bad.corp.example ssh-ed25519 {KEY_B}\n\
             @revoked * ssh-ed25519 {KEY_A}\n\
             host? ssh-ed25519 {KEY_B}\n"
        ))
        .unwrap();
        assert!(matches!(
            hosts.check("git.example.com", 2222, &key(KEY_A)),
            Err(HostKeyError::Revoked { .. })
        ));
        assert_eq!(hosts.check("a.corp.example", 22, &key(KEY_B)), Ok(()));
        assert!(matches!(
            hosts.check("bad.corp.example", 22, &key(KEY_B)),
            Err(HostKeyError::Unknown { .. })
        ));
        assert_eq!(hosts.check("host1", 22, &key(KEY_B)), Ok(()));
        assert!(hosts.check("host12", 22, &key(KEY_B)).is_err());
    }

    #[test]
    fn hashed_lines_are_skipped_and_named_in_the_error() {
        let hosts = KnownHosts::parse(&format!(
            "|1|c2FsdA==|aGFzaA== ssh-ed25519 {KEY_A}\n@cert-authority *.example ssh-ed25519 {KEY_B}\n"
        ))
        .unwrap();
        let message = hosts
            .check("git.example.com", 22, &key(KEY_A))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("2 hashed or @cert-authority lines"),
            "{message}"
        );
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let err = KnownHosts::parse("ok ssh-ed25519 AAAA\nbroken\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(
            KnownHosts::parse("h ssh-ed25519 not*base64")
                .unwrap_err()
                .line,
            1
        );
        assert!(KnownHosts::parse("@weird h ssh-ed25519 AAAA").is_err());
    }

    #[test]
    fn ports_come_from_the_url() {
        assert_eq!(ssh_port("ssh://git@git.example.com:2222/a/b.git"), 2222);
        assert_eq!(ssh_port("ssh://git.example.com/a/b.git"), 22);
        assert_eq!(ssh_port("ssh://git@[::1]:2200/a.git"), 2200);
        assert_eq!(ssh_port("git@github.com:org/repo.git"), 22);
    }
}
