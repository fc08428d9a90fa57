//! The selector parser (`api::parse_selector`, kubectl's `-l` syntax) and
//! the name globs of rules (`api::glob_matches`) on any text. Checks: no
//! panic; a parsed selector has no empty key, trimmed keys and values, only
//! Kubernetes operators, values exactly for `In`/`NotIn`, no empty list;
//! written back in the same syntax it reads the same; a glob matches itself,
//! `*` matches everything, and a glob without `*` or `?` matches only itself.
#![no_main]

use camelk_reconciler::api::{glob_matches, parse_selector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use libfuzzer_sys::fuzz_target;

/// The selector in kubectl's syntax, when every key and value is a plain
/// word the syntax can carry.
fn render(s: &LabelSelector) -> Option<String> {
    let plain = |t: &str| {
        !t.is_empty()
            && !t.starts_with('!')
            && t.chars()
                .all(|c| !c.is_whitespace() && !",()=!".contains(c))
    };
    let mut terms = Vec::new();
    for (k, v) in s.match_labels.iter().flatten() {
        if !plain(k) || !(v.is_empty() || plain(v)) {
            return None;
        }
        terms.push(format!("{k}={v}"));
    }
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        if !plain(&e.key) || values.iter().any(|v| !plain(v)) {
            return None;
        }
        terms.push(match e.operator.as_str() {
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            "NotIn" if values.len() == 1 => format!("{}!={}", e.key, values[0]),
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            other => panic!("operator {other}"),
        });
    }
    Some(terms.join(","))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(selector) = parse_selector(text) {
        assert!(selector.match_labels.as_ref().is_none_or(|m| !m.is_empty()));
        assert!(
            selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| !e.is_empty())
        );
        for (k, v) in selector.match_labels.iter().flatten() {
            assert!(
                !k.is_empty() && k.trim() == k && v.trim() == v,
                "{k:?}={v:?}"
            );
        }
        for e in selector.match_expressions.iter().flatten() {
            assert!(!e.key.is_empty() && e.key.trim() == e.key, "{e:?}");
            match e.operator.as_str() {
                "In" | "NotIn" => {
                    let values = e.values.as_ref().expect("values");
                    assert!(!values.is_empty() && values.iter().all(|v| v.trim() == v));
                }
                "Exists" | "DoesNotExist" => assert_eq!(e.values, None),
                other => panic!("operator {other} from {text:?}"),
            }
        }
        if let Some(again) = render(&selector) {
            assert_eq!(
                parse_selector(&again).as_ref(),
                Ok(&selector),
                "{text:?} written as {again:?}"
            );
        }
    }

    // Globs: the text's first line is the glob, the rest a name.
    let (glob, name) = text.split_once('\n').unwrap_or((text, text));
    assert!(glob_matches(glob, glob), "{glob:?}");
    assert!(glob_matches("*", name));
    if !glob.contains(['*', '?']) {
        assert_eq!(glob_matches(glob, name), glob == name, "{glob:?} {name:?}");
    }
});
