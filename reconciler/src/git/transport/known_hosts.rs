//! OpenSSH `known_hosts` checking for `ssh://` remotes: the host key the
//! server presents (libgit2 hands it to the certificate check) must be listed
//! for that host, or the fetch stops before any credential is sent.
//!
//! Lines are read by the `ssh-key` crate (`sshd(8)`, section
//! SSH_KNOWN_HOSTS FILE FORMAT); the crate parses but does not match, so the
//! matching is here, as `sshd` does it: comma-separated host patterns with
//! `*` and `?` wildcards ([`NameGlob`]) and `!` negation, `[host]:port` for a
//! port other than 22, hashed host names (`|1|salt|hash`, as `ssh-keygen -H`
//! and `ssh-keyscan -H` write them: HMAC-SHA1 of the name keyed by the salt),
//! and the `@revoked` marker (a revoked key is refused even when another line
//! lists it). Not supported, and skipped: `@cert-authority` lines (host
//! certificates need a CA check libgit2 does not hand us); an unknown host
//! whose file holds such lines says so in its error.
//!
//! Pure logic: no I/O; the caller reads the file (or the Secret key).

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use sha2::{Digest, Sha256};
use ssh_key::known_hosts::{Entry as SshEntry, HostPatterns, Marker};

use crate::api::NameGlob;

/// A parsed `known_hosts` file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KnownHosts {
    entries: Vec<Entry>,
    /// Lines skipped because this checker cannot match them
    /// (`@cert-authority`).
    unsupported: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    revoked: bool,
    hosts: Hosts,
    /// The SSH wire encoding of the key, as libgit2 presents host keys.
    key: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Hosts {
    /// Patterns, each negated or not.
    Patterns(Vec<(bool, NameGlob)>),
    /// `|1|salt|hash`: `hash` is HMAC-SHA1 of the name, keyed by `salt`.
    Hashed { salt: Vec<u8>, hash: [u8; 20] },
}

/// Why a presented host key is refused. Host keys are public: the messages
/// name the host and the key's SHA-256 fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HostKeyError {
    #[error(
        "host key verification failed: {host} is not in known_hosts (it presented {fingerprint}){}",
        if *.unsupported_lines > 0 {
            format!("; {} @cert-authority lines were skipped (unsupported): list the host's own key, as `ssh-keyscan` writes it", .unsupported_lines)
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
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl KnownHosts {
    /// Parses the text of a `known_hosts` file.
    pub(crate) fn parse(text: &str) -> Result<KnownHosts, KnownHostsError> {
        let mut out = KnownHosts::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: String| KnownHostsError {
                line: i + 1,
                message,
            };
            // `ssh-key` splits fields on single spaces; sshd takes any run
            // of blanks, and so did this reader.
            let fields: Vec<&str> = line.split_whitespace().collect();
            let marked = fields[0].starts_with('@');
            if marked && !matches!(fields[0], "@revoked" | "@cert-authority") {
                return Err(err(
                    "unknown marker (expected @revoked or @cert-authority)".into()
                ));
            }
            if fields.len() < 3 + usize::from(marked) {
                return Err(err("expected `hosts key-type base64-key`".into()));
            }
            let entry: SshEntry = fields
                .join(" ")
                .parse()
                .map_err(|e| err(format!("cannot read the entry: {e}")))?;
            let revoked = match entry.marker() {
                Some(Marker::CertAuthority) => {
                    out.unsupported += 1;
                    continue;
                }
                Some(Marker::Revoked) => true,
                None => false,
            };
            let key = entry
                .public_key()
                .to_bytes()
                .map_err(|e| err(format!("cannot encode the key: {e}")))?;
            let hosts = match entry.host_patterns() {
                HostPatterns::Patterns(patterns) => Hosts::Patterns(
                    patterns
                        .iter()
                        .map(|p| {
                            let p = p.to_ascii_lowercase();
                            match p.strip_prefix('!') {
                                Some(negated) => (true, NameGlob::new(negated)),
                                None => (false, NameGlob::new(&p)),
                            }
                        })
                        .collect(),
                ),
                HostPatterns::HashedName { salt, hash } => Hosts::Hashed {
                    salt: salt.clone(),
                    hash: *hash,
                },
            };
            out.entries.push(Entry {
                revoked,
                hosts,
                key,
            });
        }
        Ok(out)
    }

    /// Whether `key` (the SSH wire encoding of a public key, as libgit2
    /// gives it) is the listed, unrevoked key of `host` on `port`.
    pub(crate) fn check(&self, host: &str, port: u16, key: &[u8]) -> Result<(), HostKeyError> {
        let name = if port == 22 {
            host.to_ascii_lowercase()
        } else {
            format!("[{}]:{port}", host.to_ascii_lowercase())
        };
        let applicable: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.hosts.matches(&name))
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

impl Hosts {
    /// Whether this line lists `name` (`host`, or `[host]:port`, lowercase).
    fn matches(&self, name: &str) -> bool {
        match self {
            Hosts::Patterns(patterns) => {
                let mut matched = false;
                for (negated, glob) in patterns {
                    if glob.is_match(name) {
                        if *negated {
                            return false;
                        }
                        matched = true;
                    }
                }
                matched
            }
            Hosts::Hashed { salt, hash } => {
                // HMAC-SHA1 through ring (already linked for TLS); SHA-1 is
                // what the format fixes, not a choice made here.
                let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
                ring::hmac::verify(&key, name.as_bytes(), hash).is_ok()
            }
        }
    }
}

/// `SHA256:<base64 without padding>`, as `ssh-keygen -l` prints it.
pub(crate) fn fingerprint(key: &[u8]) -> String {
    format!("SHA256:{}", STANDARD_NO_PAD.encode(Sha256::digest(key)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use hmac::{Hmac, KeyInit, Mac};

    // Two public host keys made with `ssh-keygen -t ed25519` for these tests;
    // `ssh-keygen -l` prints KEY_A's fingerprint as FINGERPRINT_A.
    const KEY_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAICkQcYAiks0LZ7MJHqnWLdjuRzUJY60Sih2m3KGP8ydD";
    const KEY_B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIPdBH466ksg0l07KsPKd4GTEj7WUqMQ1SUi4YcULRX1W";
    const FINGERPRINT_A: &str = "SHA256:ywxmfjN+EyJ5MW/mcuTjqFBjdVkW3Wp9hyC3CV4GQmg";

    fn key(b64: &str) -> Vec<u8> {
        STANDARD.decode(b64).unwrap()
    }

    /// `|1|salt|hash` for `name`, as `ssh-keygen -H` writes it, computed with
    /// the `hmac` and `sha1` crates (not the code under test).
    fn hashed(name: &str, salt: &[u8]) -> String {
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(salt).unwrap();
        mac.update(name.as_bytes());
        let hash = mac.finalize().into_bytes();
        format!("|1|{}|{}", STANDARD.encode(salt), STANDARD.encode(hash))
    }

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        for input in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            assert_eq!(STANDARD.decode(STANDARD.encode(input)).unwrap(), input);
        }
        assert_eq!(STANDARD.encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(STANDARD.encode(b"fo"), "Zm8=");
        assert!(STANDARD.decode("Zm9v!").is_err());
        assert!(STANDARD.decode("Z===").is_err());
        assert_eq!(fingerprint(&key(KEY_A)), FINGERPRINT_A);
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
    fn a_port_entry_without_a_revocation_passes() {
        let hosts =
            KnownHosts::parse(&format!("[git.example.com]:2222\tssh-ed25519   {KEY_A}\n")).unwrap();
        assert_eq!(hosts.check("git.example.com", 2222, &key(KEY_A)), Ok(()));
        assert!(matches!(
            hosts.check("git.example.com", 22, &key(KEY_A)),
            Err(HostKeyError::Unknown { .. })
        ));
    }

    #[test]
    fn hashed_hosts_match_their_name_and_port() {
        let hosts = KnownHosts::parse(&format!(
            "{} ssh-ed25519 {KEY_A}\n{} ssh-ed25519 {KEY_B}\n",
            hashed("git.example.com", b"0123456789abcdefghij"),
            hashed("[git.example.com]:2222", b"another salt"),
        ))
        .unwrap();
        assert_eq!(hosts.check("git.example.com", 22, &key(KEY_A)), Ok(()));
        assert_eq!(hosts.check("Git.Example.com", 22, &key(KEY_A)), Ok(()));
        assert!(matches!(
            hosts.check("git.example.com", 22, &key(KEY_B)),
            Err(HostKeyError::Mismatch { .. })
        ));
        assert_eq!(hosts.check("git.example.com", 2222, &key(KEY_B)), Ok(()));
        assert!(matches!(
            hosts.check("other.example.com", 22, &key(KEY_A)),
            Err(HostKeyError::Unknown {
                unsupported_lines: 0,
                ..
            })
        ));
        // A revoked key under a hashed name is refused too.
        let revoked = KnownHosts::parse(&format!(
            "{} ssh-ed25519 {KEY_A}\n@revoked {} ssh-ed25519 {KEY_A}\n",
            hashed("git.example.com", b"s1"),
            hashed("git.example.com", b"s2"),
        ))
        .unwrap();
        assert!(matches!(
            revoked.check("git.example.com", 22, &key(KEY_A)),
            Err(HostKeyError::Revoked { .. })
        ));
    }

    #[test]
    fn rsa_and_ecdsa_keys_and_a_line_hashed_by_ssh_keygen() {
        // Made with `ssh-keygen -t rsa` / `-t ecdsa`; the hashed line is what
        // `ssh-keygen -H` wrote for `git.example.com` and the ECDSA key.
        const RSA: &str = "AAAAB3NzaC1yc2EAAAADAQABAAABAQClcbV3gJ3Tqjwy8jh3Yqc+dEYcTTXAeOT+QPS2yFtQFx01+OlLH0PBPHjFjqKfE85/FBO13HEsRSWO35Nk8NAYiDhwvzdZtRnJDC4yzxkbqfU5cATF9BIFOraHQAX1PV9HgAN+GmjerwV8kcZYeNrkKlfAEJXBzmAl+J8y3kbTe1Ab5E/mU2jzOfGUdjrU15vvZ43BajWptx/+CQsJ9otojF6EPzauyvXp79MPLseAcsdFheYK9NuAr1Zhaq6jMZDeipnL4K5Qxn+T2IuhJAl0FgMOgdBUieNT0dxdlH7K6wysf1RwQv/1yUV9hqUENNIr8qkRGzcTqDDlaJOn4+Wt";
        const ECDSA: &str = "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBK3zfx5ZDhbJXby2ZcqKcDHs/7mZ7yahGpmh60ecKtwoEKqKwVVDHmwGVPcALZWdT4fXkMsoSpTWgsJFI4miSNE=";
        const HASHED: &str = "|1|mZ40T8NiFGfvEWg5e4U6lGDH/+0=|3L+lEhkpZIkaodR8oVDmGIed0CE=";
        let hosts = KnownHosts::parse(&format!(
            "rsa.example.com ssh-rsa {RSA}\n{HASHED} ecdsa-sha2-nistp256 {ECDSA}\n"
        ))
        .unwrap();
        assert_eq!(hosts.check("rsa.example.com", 22, &key(RSA)), Ok(()));
        assert_eq!(hosts.check("git.example.com", 22, &key(ECDSA)), Ok(()));
        assert!(matches!(
            hosts.check("git.example.com", 22, &key(RSA)),
            Err(HostKeyError::Mismatch { .. })
        ));
        assert!(matches!(
            hosts.check("git.example.com", 2222, &key(ECDSA)),
            Err(HostKeyError::Unknown { .. })
        ));
        // As `ssh-keygen -l` prints them.
        assert_eq!(
            fingerprint(&key(RSA)),
            "SHA256:81zAV2VAgezRMRoJKu1tBn7paWEvBLggP3jVCMhTLO8"
        );
        assert_eq!(
            fingerprint(&key(ECDSA)),
            "SHA256:grqT+9v2v7ScW5Vvqt7gJAyGlvBRIdA7pqeTm/6AE5M"
        );
    }

    #[test]
    fn a_key_type_ssh_key_does_not_know_is_compared_as_bytes() {
        // `ssh-foo@example.com` with opaque key data: a newer algorithm must
        // not make the whole file unreadable.
        const OTHER: &str = "AAAAE3NzaC1mb29AZXhhbXBsZS5jb20AAAAQb3BhcXVlIGtleSBieXRlcw==";
        let hosts = KnownHosts::parse(&format!(
            "new.example.com ssh-foo@example.com {OTHER}\nold.example.com ssh-ed25519 {KEY_A}\n"
        ))
        .unwrap();
        assert_eq!(hosts.check("new.example.com", 22, &key(OTHER)), Ok(()));
        assert_eq!(hosts.check("old.example.com", 22, &key(KEY_A)), Ok(()));
    }

    #[test]
    fn cert_authority_lines_are_skipped_and_named_in_the_error() {
        // A hashed line naming another host is read (and does not match);
        // the @cert-authority line is skipped and counted.
        let hosts = KnownHosts::parse(&format!(
            "|1|c2FsdA==|aGFzaA== ssh-ed25519 {KEY_A}\n@cert-authority *.example ssh-ed25519 {KEY_B}\n"
        ))
        .unwrap();
        let message = hosts
            .check("git.example.com", 22, &key(KEY_A))
            .unwrap_err()
            .to_string();
        assert!(message.contains("1 @cert-authority lines"), "{message}");
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let err = KnownHosts::parse(&format!("ok ssh-ed25519 {KEY_A}\nbroken\n")).unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(
            KnownHosts::parse("h ssh-ed25519 not*base64")
                .unwrap_err()
                .line,
            1
        );
        assert!(KnownHosts::parse("@weird h ssh-ed25519 AAAA").is_err());
        // The key type must be the key's own.
        let err = KnownHosts::parse(&format!("h ssh-rsa {KEY_A}")).unwrap_err();
        assert_eq!(err.line, 1);
        // A key that is no SSH public key at all.
        assert!(KnownHosts::parse("h ssh-ed25519 AAAA").is_err());
    }
}
