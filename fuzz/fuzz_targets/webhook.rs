//! The webhook's signature check (`sync::verify_signature`) on any payload,
//! secret and signature header. Input bytes: one byte `n`, then `n` bytes of
//! secret, one mode byte, then the payload (the request body); modes 0-4 sign
//! the payload correctly in GitHub's or Gitea's header (then flip a bit of the
//! payload or the signature), other modes use the bytes after the mode byte up
//! to the first newline as the header's value and the rest as the payload.
//!
//! Checks, against an independent HMAC-SHA256 (`ring`): a correct signature
//! is accepted, in either header and in either hex case; a changed payload
//! or signature is refused; whatever the header says, it is accepted only
//! when it carries the payload's MAC.
#![no_main]

use camelk_reconciler::sync::{SignatureError, verify_signature};
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

fn mac(secret: &[u8], body: &[u8]) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    ring::hmac::sign(&key, body).as_ref().to_vec()
}

fn hex(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if upper {
                format!("{b:02X}")
            } else {
                format!("{b:02x}")
            }
        })
        .collect()
}

fn headers(name: &str, value: &str) -> Option<HeaderMap> {
    let mut h = HeaderMap::new();
    h.insert(
        http::HeaderName::from_static(if name == "github" {
            "x-hub-signature-256"
        } else {
            "x-gitea-signature"
        }),
        HeaderValue::from_str(value).ok()?,
    );
    Some(h)
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = (n as usize).min(rest.len());
    let (secret, rest) = rest.split_at(n);
    let Some((&mode, body)) = rest.split_first() else {
        assert_eq!(
            verify_signature(secret, &HeaderMap::new(), rest),
            Err(SignatureError::Missing)
        );
        return;
    };
    let good = mac(secret, body);
    match mode {
        0..=4 => {
            let upper = mode % 2 == 1;
            let github = headers("github", &format!("sha256={}", hex(&good, upper))).unwrap();
            let gitea = headers("gitea", &hex(&good, upper)).unwrap();
            assert_eq!(verify_signature(secret, &github, body), Ok(()));
            assert_eq!(verify_signature(secret, &gitea, body), Ok(()));
            // GitHub's header without its prefix is malformed.
            let bare = headers("github", &hex(&good, upper)).unwrap();
            assert_eq!(
                verify_signature(secret, &bare, body),
                Err(SignatureError::Malformed)
            );
            if !body.is_empty() {
                let mut tampered = body.to_vec();
                let i = usize::from(mode) * 7919 % tampered.len();
                tampered[i] ^= 1 << (mode % 8);
                assert_eq!(
                    verify_signature(secret, &github, &tampered),
                    Err(SignatureError::Mismatch)
                );
            }
            let mut forged = good.clone();
            let at = usize::from(mode) % forged.len();
            forged[at] ^= 0x80;
            let forged = headers("gitea", &hex(&forged, upper)).unwrap();
            assert_eq!(
                verify_signature(secret, &forged, body),
                Err(SignatureError::Mismatch)
            );
            // A truncated signature is no signature.
            let short = headers("gitea", &hex(&good[..16], upper)).unwrap();
            assert_eq!(
                verify_signature(secret, &short, body),
                Err(SignatureError::Mismatch)
            );
        }
        _ => {
            let split = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
            let (value, payload) = body.split_at(split);
            let payload = payload.get(1..).unwrap_or_default();
            let Ok(value) = std::str::from_utf8(value) else {
                return;
            };
            let name = if mode % 2 == 0 { "github" } else { "gitea" };
            let Some(h) = headers(name, value) else {
                return;
            };
            let want = mac(secret, payload);
            let carried = if name == "github" {
                value.strip_prefix("sha256=")
            } else {
                Some(value)
            };
            // A header is read only as visible ASCII text.
            let decoded = carried
                .filter(|_| value.is_ascii())
                .and_then(|v| decode(v.trim()));
            match verify_signature(secret, &h, payload) {
                Ok(()) => assert_eq!(decoded.as_deref(), Some(&want[..]), "{value:?}"),
                Err(SignatureError::Missing) => panic!("the header is there"),
                Err(SignatureError::Malformed) => assert_eq!(decoded, None, "{value:?}"),
                Err(SignatureError::Mismatch) => {
                    assert!(decoded.is_some_and(|d| d != want), "{value:?}")
                }
            }
        }
    }
});

/// Hex as GitHub and Gitea write it (either case), independently of `hex`.
fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}
