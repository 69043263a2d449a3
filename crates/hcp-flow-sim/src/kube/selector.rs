//! Label and field selectors as the API server parses them (the subset
//! clients send: `=`, `==`, `!=`, `in`, `notin`, exists, `!`exists).

use std::collections::BTreeSet;

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid selector {selector:?}: {why}")]
pub struct SelectorError {
    pub selector: String,
    pub why: &'static str,
}

/// Split on commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn set_of(s: &str) -> Option<BTreeSet<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

pub fn parse_label_selector(selector: &str) -> Result<Vec<Requirement>, SelectorError> {
    let err = |why| SelectorError {
        selector: selector.to_string(),
        why,
    };
    let mut out = Vec::new();
    for term in terms(selector) {
        if let Some((k, v)) = term.split_once("!=") {
            out.push(Requirement::NotEquals(k.trim().into(), v.trim().into()));
        } else if let Some((k, v)) = term.split_once("==") {
            out.push(Requirement::Equals(k.trim().into(), v.trim().into()));
        } else if let Some((k, v)) = term.split_once('=') {
            out.push(Requirement::Equals(k.trim().into(), v.trim().into()));
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            let set = set_of(rest).ok_or_else(|| err("notin needs (a,b)"))?;
            out.push(Requirement::NotIn(k.trim().into(), set));
        } else if let Some((k, rest)) = term.split_once(" in ") {
            let set = set_of(rest).ok_or_else(|| err("in needs (a,b)"))?;
            out.push(Requirement::In(k.trim().into(), set));
        } else if let Some(k) = term.strip_prefix('!') {
            out.push(Requirement::NotExists(k.trim().into()));
        } else if term.contains(' ') || term.contains('(') {
            return Err(err("unknown operator"));
        } else {
            out.push(Requirement::Exists(term.to_string()));
        }
    }
    Ok(out)
}

/// Field selectors: only `metadata.name` and `metadata.namespace`, as for CRDs.
pub fn parse_field_selector(selector: &str) -> Result<Vec<Requirement>, SelectorError> {
    let reqs = parse_label_selector(selector)?;
    for r in &reqs {
        let field = match r {
            Requirement::Equals(k, _) | Requirement::NotEquals(k, _) => k,
            _ => {
                return Err(SelectorError {
                    selector: selector.to_string(),
                    why: "field selectors support =, == and != only",
                });
            }
        };
        if field != "metadata.name" && field != "metadata.namespace" {
            return Err(SelectorError {
                selector: selector.to_string(),
                why: "only metadata.name and metadata.namespace are supported",
            });
        }
    }
    Ok(reqs)
}

fn matches_with(reqs: &[Requirement], get: impl Fn(&str) -> Option<String>) -> bool {
    reqs.iter().all(|r| match r {
        Requirement::Equals(k, v) => get(k).as_deref() == Some(v.as_str()),
        Requirement::NotEquals(k, v) => get(k).as_deref() != Some(v.as_str()),
        Requirement::In(k, set) => get(k).is_some_and(|x| set.contains(&x)),
        Requirement::NotIn(k, set) => get(k).is_none_or(|x| !set.contains(&x)),
        Requirement::Exists(k) => get(k).is_some(),
        Requirement::NotExists(k) => get(k).is_none(),
    })
}

pub fn labels_match(reqs: &[Requirement], object: &Value) -> bool {
    let labels = object.pointer("/metadata/labels");
    matches_with(reqs, |k| {
        labels
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

pub fn fields_match(reqs: &[Requirement], object: &Value) -> bool {
    matches_with(reqs, |k| {
        let pointer = match k {
            "metadata.name" => "/metadata/name",
            "metadata.namespace" => "/metadata/namespace",
            _ => return None,
        };
        Some(
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": "x"}}});
        let yes = [
            "a",
            "a=1",
            "a==1",
            "a!=2",
            "a in (1,2)",
            "c notin (1)",
            "!c",
            "a=1,b in (x, y)",
        ];
        let no = [
            "c",
            "a=2",
            "a!=1",
            "a in (2,3)",
            "b notin (x)",
            "!a",
            "a=1,b=y",
        ];
        for s in yes {
            assert!(labels_match(&parse_label_selector(s).unwrap(), &obj), "{s}");
        }
        for s in no {
            assert!(
                !labels_match(&parse_label_selector(s).unwrap(), &obj),
                "{s}"
            );
        }
        assert!(parse_label_selector("a in 1").is_err());
        assert!(labels_match(&parse_label_selector("").unwrap(), &obj));
    }

    #[test]
    fn field_selector_name_and_namespace() {
        let obj = json!({"metadata": {"name": "n1", "namespace": "ns"}});
        let f = |s| parse_field_selector(s).unwrap();
        assert!(fields_match(&f("metadata.name=n1"), &obj));
        assert!(fields_match(
            &f("metadata.namespace!=other,metadata.name==n1"),
            &obj
        ));
        assert!(!fields_match(&f("metadata.namespace=other"), &obj));
        assert!(parse_field_selector("spec.x=1").is_err());
    }
}
