//! The `search` query parameter of the Clusters Service and Maestro: a small
//! subset of their SQL-where-like language, enough for what the exporter and
//! an SRE send: `f = 'v'`, `!=`/`<>`, `<`, `<=`, `>`, `>=`, `like`,
//! `[not] in ('a', 'b')`, `is [not] null`, joined with `and`.
//! Anything else is rejected, as the real services reject what they cannot
//! parse (the caller answers 400).

use std::fmt;

use super::plan::Ms;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchError(pub String);

impl fmt::Display for SearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a searchable field compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Str,
    Time,
    Int,
}

/// A typed field value of one object; `Null` never matches a comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Str(&'a str),
    Time(Ms),
    Int(i64),
    Null,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Lit {
    Str(String),
    Time(Ms),
    Int(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Like,
    NotLike,
    In,
    NotIn,
    IsNull,
    IsNotNull,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cond {
    field: String,
    op: Op,
    values: Vec<Lit>,
}

/// A parsed search: every condition must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Search {
    conds: Vec<Cond>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, SearchError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '\'' => {
                let mut v = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(SearchError("unterminated string literal".into())),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            v.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            v.push(*ch);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(v));
            }
            '=' => {
                out.push(Tok::Op("="));
                i += 1;
            }
            '!' | '<' | '>' => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                let op = match two.as_str() {
                    "!=" => "!=",
                    "<>" => "!=",
                    "<=" => "<=",
                    ">=" => ">=",
                    _ if c == '<' => "<",
                    _ if c == '>' => ">",
                    _ => return Err(SearchError(format!("unexpected character '{c}'"))),
                };
                i += if op.len() == 2 { 2 } else { 1 };
                out.push(Tok::Op(op));
            }
            c if c.is_ascii_digit() || c == '-' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_digit() || chars[i] == '-' || chars[i] == '.')
                {
                    i += 1;
                }
                out.push(Tok::Num(chars[start..i].iter().collect()));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.'))
                {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(SearchError(format!("unexpected character '{other}'"))),
        }
    }
    Ok(out)
}

fn keyword(t: Option<&Tok>, kw: &str) -> bool {
    matches!(t, Some(Tok::Ident(s)) if s.eq_ignore_ascii_case(kw))
}

impl Search {
    /// Parses `s`; `kind_of` names the searchable fields and their kinds.
    pub fn parse(s: &str, kind_of: impl Fn(&str) -> Option<Kind>) -> Result<Search, SearchError> {
        if s.contains("->") || s.contains("@>") {
            return Err(SearchError(
                "JSONB search expressions are not supported".into(),
            ));
        }
        let toks = tokenize(s)?;
        if toks.is_empty() {
            return Ok(Search::default());
        }
        let mut conds = Vec::new();
        let mut i = 0;
        loop {
            let field = match toks.get(i) {
                // Unquoted SQL identifiers are case-insensitive.
                Some(Tok::Ident(f)) => f.to_ascii_lowercase(),
                other => {
                    return Err(SearchError(format!(
                        "expected a field name, found {other:?}"
                    )));
                }
            };
            let kind = kind_of(&field)
                .ok_or_else(|| SearchError(format!("'{field}' is not a valid field name")))?;
            i += 1;
            let lit = |t: Option<&Tok>| -> Result<Lit, SearchError> {
                let raw = match t {
                    Some(Tok::Str(v)) | Some(Tok::Num(v)) => v,
                    other => {
                        return Err(SearchError(format!("expected a literal, found {other:?}")));
                    }
                };
                match kind {
                    Kind::Str => Ok(Lit::Str(raw.clone())),
                    Kind::Int => raw
                        .parse()
                        .map(Lit::Int)
                        .map_err(|_| SearchError(format!("'{raw}' is not an integer"))),
                    Kind::Time => raw
                        .parse::<jiff::Timestamp>()
                        .map(|t| Lit::Time(t.as_millisecond()))
                        .map_err(|e| SearchError(format!("'{raw}' is not an RFC 3339 time: {e}"))),
                }
            };
            let (op, values) = match toks.get(i) {
                Some(Tok::Op(o)) => {
                    let op = match *o {
                        "=" => Op::Eq,
                        "!=" => Op::Ne,
                        "<" => Op::Lt,
                        "<=" => Op::Le,
                        ">" => Op::Gt,
                        _ => Op::Ge,
                    };
                    let v = lit(toks.get(i + 1))?;
                    i += 2;
                    (op, vec![v])
                }
                t if keyword(t, "like") => {
                    let v = lit(toks.get(i + 1))?;
                    i += 2;
                    (Op::Like, vec![v])
                }
                t if keyword(t, "is") => {
                    if keyword(toks.get(i + 1), "null") {
                        i += 2;
                        (Op::IsNull, vec![])
                    } else if keyword(toks.get(i + 1), "not") && keyword(toks.get(i + 2), "null") {
                        i += 3;
                        (Op::IsNotNull, vec![])
                    } else {
                        return Err(SearchError("expected 'is [not] null'".into()));
                    }
                }
                t if keyword(t, "not") && keyword(toks.get(i + 1), "like") => {
                    let v = lit(toks.get(i + 2))?;
                    i += 3;
                    (Op::NotLike, vec![v])
                }
                t if keyword(t, "in") || (keyword(t, "not") && keyword(toks.get(i + 1), "in")) => {
                    let op = if keyword(t, "in") { Op::In } else { Op::NotIn };
                    i += if op == Op::In { 1 } else { 2 };
                    if toks.get(i) != Some(&Tok::LParen) {
                        return Err(SearchError("expected '(' after 'in'".into()));
                    }
                    i += 1;
                    let mut values = Vec::new();
                    loop {
                        values.push(lit(toks.get(i))?);
                        i += 1;
                        match toks.get(i) {
                            Some(Tok::Comma) => i += 1,
                            Some(Tok::RParen) => {
                                i += 1;
                                break;
                            }
                            other => {
                                return Err(SearchError(format!(
                                    "expected ',' or ')', found {other:?}"
                                )));
                            }
                        }
                    }
                    (op, values)
                }
                other => {
                    return Err(SearchError(format!(
                        "expected an operator after '{field}', found {other:?}"
                    )));
                }
            };
            conds.push(Cond { field, op, values });
            match toks.get(i) {
                None => break,
                t if keyword(t, "and") => i += 1,
                other => {
                    return Err(SearchError(format!(
                        "expected 'and' or the end, found {other:?}"
                    )));
                }
            }
        }
        Ok(Search { conds })
    }

    /// Whether an object matches; `field` gives its value for a field name
    /// accepted at parse time.
    pub fn matches<'a>(&self, field: impl Fn(&str) -> Value<'a>) -> bool {
        self.conds.iter().all(|c| c.holds(&field(&c.field)))
    }
}

fn like(pattern: &str, s: &str) -> bool {
    // SQL LIKE with % and _ wildcards.
    fn rec(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('%', rest)) => (0..=s.len()).any(|k| rec(rest, &s[k..])),
            Some(('_', rest)) => !s.is_empty() && rec(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && rec(rest, &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    rec(&p, &s)
}

impl Cond {
    fn holds(&self, v: &Value<'_>) -> bool {
        match self.op {
            Op::IsNull => return *v == Value::Null,
            Op::IsNotNull => return *v != Value::Null,
            _ => {}
        }
        if *v == Value::Null {
            return false;
        }
        let cmp = |l: &Lit| -> Option<std::cmp::Ordering> {
            match (v, l) {
                (Value::Str(a), Lit::Str(b)) => Some((*a).cmp(b.as_str())),
                (Value::Time(a), Lit::Time(b)) => Some(a.cmp(b)),
                (Value::Int(a), Lit::Int(b)) => Some(a.cmp(b)),
                _ => None,
            }
        };
        use std::cmp::Ordering::*;
        let first = self.values.first();
        match self.op {
            Op::Eq => first.and_then(cmp) == Some(Equal),
            Op::Ne => first.and_then(cmp).is_some_and(|o| o != Equal),
            Op::Lt => first.and_then(cmp) == Some(Less),
            Op::Le => matches!(first.and_then(cmp), Some(Less | Equal)),
            Op::Gt => first.and_then(cmp) == Some(Greater),
            Op::Ge => matches!(first.and_then(cmp), Some(Greater | Equal)),
            Op::Like | Op::NotLike => {
                let hit = matches!((v, first), (Value::Str(s), Some(Lit::Str(p))) if like(p, s));
                hit == (self.op == Op::Like)
            }
            Op::In => self.values.iter().any(|l| cmp(l) == Some(Equal)),
            Op::NotIn => self
                .values
                .iter()
                .all(|l| cmp(l).is_some_and(|o| o != Equal)),
            Op::IsNull | Op::IsNotNull => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn kinds(f: &str) -> Option<Kind> {
        match f {
            "state" | "id" | "name" => Some(Kind::Str),
            "updated_at" | "deleted_at" => Some(Kind::Time),
            "version" => Some(Kind::Int),
            _ => None,
        }
    }

    fn obj<'a>(state: &'a str, id: &'a str, updated: Ms) -> impl Fn(&str) -> Value<'a> {
        move |f| match f {
            "state" => Value::Str(state),
            "id" => Value::Str(id),
            "name" => Value::Str("hcp-000001"),
            "updated_at" => Value::Time(updated),
            "version" => Value::Int(1),
            _ => Value::Null,
        }
    }

    #[test]
    fn in_not_in_and() {
        let s = Search::parse(
            "state not in ('ready','hibernating', 'error') and id in ('a','b')",
            kinds,
        )
        .unwrap();
        assert!(s.matches(obj("installing", "a", 0)));
        assert!(!s.matches(obj("ready", "a", 0)));
        assert!(!s.matches(obj("installing", "c", 0)));
        let s = Search::parse("STATE IN ('ready')", kinds).unwrap();
        assert!(s.matches(obj("ready", "x", 0)));
    }

    #[test]
    fn time_comparisons_parse_rfc3339() {
        let t: jiff::Timestamp = "2025-01-01T00:00:00.5Z".parse().unwrap();
        let ms = t.as_millisecond();
        let gt = Search::parse("updated_at > '2025-01-01T00:00:00.5Z'", kinds).unwrap();
        let ge = Search::parse("updated_at >= '2025-01-01T00:00:00.5Z'", kinds).unwrap();
        assert!(!gt.matches(obj("", "", ms)));
        assert!(ge.matches(obj("", "", ms)));
        assert!(gt.matches(obj("", "", ms + 1)));
    }

    #[test]
    fn like_null_int_and_quotes() {
        assert!(
            Search::parse("name like 'hcp-%'", kinds)
                .unwrap()
                .matches(obj("", "", 0))
        );
        assert!(
            Search::parse("name not like 'x%'", kinds)
                .unwrap()
                .matches(obj("", "", 0))
        );
        assert!(
            Search::parse("deleted_at is null", kinds)
                .unwrap()
                .matches(obj("", "", 0))
        );
        assert!(
            !Search::parse("deleted_at is not null", kinds)
                .unwrap()
                .matches(obj("", "", 0))
        );
        assert!(
            Search::parse("version = 1", kinds)
                .unwrap()
                .matches(obj("", "", 0))
        );
        assert!(
            Search::parse("id = 'it''s'", kinds)
                .unwrap()
                .matches(obj("", "it's", 0))
        );
        assert!(Search::parse("", kinds).unwrap().matches(obj("", "", 0)));
    }

    #[test]
    fn rejects_what_it_cannot_parse() {
        for bad in [
            "bogus = 'x'",
            "state = ",
            "state in 'a'",
            "state = 'a' or state = 'b'",
            "updated_at > 'yesterday'",
            "payload->'metadata'->>'name' = 'x'",
            "state = 'unterminated",
        ] {
            assert!(Search::parse(bad, kinds).is_err(), "{bad}");
        }
    }
}
