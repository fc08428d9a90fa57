//! Selecting by name and by labels, for every layer above: label selectors
//! written as `kubectl -l` takes them
//! (`app=orders,tier!=gold,region in (eu,us),!legacy`) turned into the
//! `LabelSelector` the manifest stores ([`parse_selector`]), matched as
//! Kubernetes matches them ([`LabelMatcher`], kube's [`Selector`]), and the
//! shell-style name globs of rules and of `known_hosts` ([`NameGlob`],
//! `globset`).
//!
//! Pure logic: no I/O.

use std::collections::BTreeMap;

use globset::{GlobBuilder, GlobMatcher};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::core::{Expression, Selector};

/// The labels of one object, as selectors match them: a vector sorted by
/// key. A resource carries a handful, and the sync keeps those of every
/// resource it tracks; a `BTreeMap` would allocate a node of 11 slots for each.
pub type Labels = litemap::LiteMap<String, String>;

/// Why a selector text cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector `{text}`: {message}")]
pub struct SelectorError {
    /// The selector as written.
    pub(crate) text: String,
    /// What is wrong with it.
    pub(crate) message: String,
}

/// Parses kubectl's selector syntax. `k=v` and `k==v` become `matchLabels`;
/// `!=`, `in`, `notin`, `k` and `!k` become `matchExpressions`.
pub fn parse_selector(text: &str) -> Result<LabelSelector, SelectorError> {
    let fail = |message: String| SelectorError {
        text: text.to_string(),
        message,
    };
    let mut labels = BTreeMap::new();
    let mut expressions = Vec::new();
    for term in split_terms(text) {
        let term = term.trim();
        if term.is_empty() {
            return Err(fail("empty requirement".into()));
        }
        let requirement =
            |key: &str, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
                key: key.trim().to_string(),
                operator: operator.to_string(),
                values,
            };
        if let Some(key) = term.strip_prefix('!') {
            expressions.push(requirement(key, "DoesNotExist", None));
        } else if let Some((key, value)) = term.split_once("!=") {
            expressions.push(requirement(
                key,
                "NotIn",
                Some(vec![value.trim().to_string()]),
            ));
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels.insert(key.trim().to_string(), value.trim().to_string());
        } else if let Some(open) = term.find('(') {
            let head: Vec<&str> = term[..open].split_whitespace().collect();
            let Some(values) = term[open + 1..].strip_suffix(')') else {
                return Err(fail(format!("missing `)` in `{term}`")));
            };
            let values: Vec<String> = values
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            let operator = match head.as_slice() {
                [_, "in"] => "In",
                [_, "notin"] => "NotIn",
                _ => {
                    return Err(fail(format!(
                        "expected `key in (...)` or `key notin (...)`, found `{term}`"
                    )));
                }
            };
            if values.is_empty() {
                return Err(fail(format!("`{term}` lists no values")));
            }
            expressions.push(requirement(head[0], operator, Some(values)));
        } else if term.split_whitespace().count() == 1 {
            expressions.push(requirement(term, "Exists", None));
        } else {
            return Err(fail(format!("cannot read `{term}`")));
        }
    }
    if labels
        .keys()
        .chain(expressions.iter().map(|e| &e.key))
        .any(|k| k.is_empty())
    {
        return Err(fail("a requirement has an empty key".into()));
    }
    Ok(LabelSelector {
        match_labels: (!labels.is_empty()).then_some(labels),
        match_expressions: (!expressions.is_empty()).then_some(expressions),
    })
}

/// Splits on commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

/// A shell-style glob on a name, compiled once: `*` matches any run of
/// characters (`/` and `.` included), `?` exactly one; every other
/// character, `[`, `]`, `{` and `}` included, matches itself (so
/// `[host]:2222` in `known_hosts` is a literal).
#[derive(Clone, Debug)]
pub(crate) struct NameGlob(GlobMatcher);

impl NameGlob {
    pub(crate) fn new(glob: &str) -> NameGlob {
        let mut pattern = String::with_capacity(glob.len() + 8);
        let mut literal = [0u8; 4];
        for c in glob.chars() {
            match c {
                '*' | '?' => pattern.push(c),
                c => pattern.push_str(&globset::escape(c.encode_utf8(&mut literal))),
            }
        }
        let matcher = GlobBuilder::new(&pattern)
            .literal_separator(false)
            .backslash_escape(false)
            .build()
            // Only `*`, `?` and escaped literals reach the builder: no
            // pattern can be malformed.
            .expect("an escaped glob always compiles")
            .compile_matcher();
        NameGlob(matcher)
    }

    pub(crate) fn is_match(&self, name: &str) -> bool {
        self.0.is_match(name)
    }
}

impl PartialEq for NameGlob {
    fn eq(&self, other: &NameGlob) -> bool {
        self.0.glob() == other.0.glob()
    }
}

impl Eq for NameGlob {}

/// Whether `name` matches the shell-style `glob` (see `NameGlob`; compile
/// a `NameGlob` once when matching many names).
pub fn glob_matches(glob: &str, name: &str) -> bool {
    NameGlob::new(glob).is_match(name)
}

/// A `LabelSelector` compiled once into kube's [`Expression`]s, with the
/// Kubernetes semantics: an empty selector matches everything, `NotIn` and
/// `DoesNotExist` match when the key is absent. A requirement with an
/// unknown operator makes the selector match nothing (validation refuses
/// it before), and a missing `values` list reads as an empty one.
#[derive(Clone, Debug)]
pub(crate) struct LabelMatcher(Option<Vec<Expression>>);

impl LabelMatcher {
    pub(crate) fn new(selector: &LabelSelector) -> LabelMatcher {
        let mut selector = selector.clone();
        for requirement in selector.match_expressions.iter_mut().flatten() {
            // kube refuses `In`/`NotIn` without values; Kubernetes' own
            // matching treats them as an empty set, and so did this library.
            requirement.values.get_or_insert_with(Vec::new);
        }
        LabelMatcher(
            Selector::try_from(selector)
                .ok()
                .map(|s| s.into_iter().collect()),
        )
    }

    pub(crate) fn matches(&self, labels: &Labels) -> bool {
        self.0
            .as_ref()
            .is_some_and(|all| all.iter().all(|e| expression_matches(e, labels)))
    }
}

/// Kubernetes' rule for one requirement (as kube's `SelectorExt`, which
/// reads a `BTreeMap`).
fn expression_matches(expression: &Expression, labels: &Labels) -> bool {
    let value = |key: &String| labels.get(key.as_str());
    match expression {
        Expression::In(key, values) => value(key).is_some_and(|v| values.contains(v)),
        Expression::NotIn(key, values) => value(key).is_none_or(|v| !values.contains(v)),
        Expression::Equal(key, wanted) => value(key) == Some(wanted),
        Expression::NotEqual(key, wanted) => value(key) != Some(wanted),
        Expression::Exists(key) => value(key).is_some(),
        Expression::DoesNotExist(key) => value(key).is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector_matches(selector: &LabelSelector, labels: &Labels) -> bool {
        LabelMatcher::new(selector).matches(labels)
    }

    #[test]
    fn kubectl_syntax() {
        let s = parse_selector("app=orders, tier!=gold,region in (eu, us),!legacy,canary").unwrap();
        assert_eq!(
            s.match_labels.unwrap().get("app").map(String::as_str),
            Some("orders")
        );
        let ops: Vec<_> = s
            .match_expressions
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.operator))
            .collect();
        assert_eq!(
            ops,
            vec![
                ("tier".into(), "NotIn".into()),
                ("region".into(), "In".into()),
                ("legacy".into(), "DoesNotExist".into()),
                ("canary".into(), "Exists".into())
            ]
        );
        assert!(parse_selector("a in (").is_err());
        assert!(parse_selector("a,,b").is_err());
        assert!(parse_selector("=x").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("orders-*", "orders-eu"));
        assert!(!glob_matches("orders-*", "order"));
        assert!(glob_matches("a?c", "abc"));
        assert!(glob_matches("*-eu-*", "shop-eu-1"));
        assert!(!glob_matches("*-eu", "shop-eu-1"));
        assert!(glob_matches("", ""));
        assert!(!glob_matches("", "x"));
    }

    #[test]
    fn star_and_question_mark_are_the_only_wildcards() {
        // `*` spans any run, separators included; `?` is exactly one character.
        assert!(glob_matches("*", ""));
        assert!(glob_matches("**", "a/b.c"));
        assert!(glob_matches("a*b*c", "a-x-b-y-c"));
        assert!(!glob_matches("a*b*c", "a-x-c-y-b"));
        assert!(glob_matches("host?", "host1"));
        assert!(!glob_matches("host?", "host12"));
        assert!(!glob_matches("host?", "host"));
        assert!(glob_matches("??", "ab") && !glob_matches("??", "a"));
        assert!(glob_matches("*.corp.example", "a.corp.example"));
        // Brackets, braces and backslashes are literals.
        assert!(glob_matches(
            "[git.example.com]:2222",
            "[git.example.com]:2222"
        ));
        assert!(!glob_matches("[git.example.com]:2222", "g:2222"));
        assert!(glob_matches("[*]:22?2", "[h.example]:2222"));
        assert!(glob_matches("{a,b}", "{a,b}") && !glob_matches("{a,b}", "a"));
        assert!(glob_matches("a\\*", "a\\b") && !glob_matches("a\\*", "ab"));
        assert!(!glob_matches("a.c", "abc"));
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_follow_kubernetes() {
        let app = labels(&[("app", "orders"), ("tier", "gold")]);
        let none = labels(&[]);
        assert!(selector_matches(&LabelSelector::default(), &none));
        let s = parse_selector("app=orders").unwrap();
        assert!(selector_matches(&s, &app) && !selector_matches(&s, &none));
        let s = parse_selector("region in (eu,us)").unwrap();
        assert!(!selector_matches(&s, &app));
        assert!(selector_matches(&s, &labels(&[("region", "eu")])));
        let s = parse_selector("tier notin (silver)").unwrap();
        assert!(selector_matches(&s, &app) && selector_matches(&s, &none));
        assert!(!selector_matches(&s, &labels(&[("tier", "silver")])));
        let s = parse_selector("tier!=gold").unwrap();
        assert!(!selector_matches(&s, &app) && selector_matches(&s, &none));
        let s = parse_selector("app,!legacy").unwrap();
        assert!(selector_matches(&s, &app) && !selector_matches(&s, &none));
        assert!(!selector_matches(
            &s,
            &labels(&[("app", "x"), ("legacy", "")])
        ));
        // matchLabels and matchExpressions must both hold.
        let s = parse_selector("app=orders,tier in (silver)").unwrap();
        assert!(!selector_matches(&s, &app));
    }

    #[test]
    fn odd_requirements_keep_their_old_meaning() {
        let requirement = |operator: &str, values: Option<Vec<String>>| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: operator.into(),
                values,
            }]),
        };
        let gold = labels(&[("tier", "gold")]);
        // No values: `In` matches nothing, `NotIn` everything.
        assert!(!selector_matches(&requirement("In", None), &gold));
        assert!(selector_matches(&requirement("NotIn", None), &gold));
        assert!(selector_matches(&requirement("NotIn", None), &labels(&[])));
        // An unknown operator matches nothing.
        assert!(!selector_matches(&requirement("Gt", Some(vec![])), &gold));
        assert!(!selector_matches(&requirement("Gt", None), &labels(&[])));
    }
}
