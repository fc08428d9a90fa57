//! Label selectors written as `kubectl -l` takes them
//! (`app=orders,tier!=gold,region in (eu,us),!legacy`), turned into the
//! `LabelSelector` the manifest stores.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Why a selector text cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector `{text}`: {message}")]
pub struct SelectorError {
    pub text: String,
    pub message: String,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
