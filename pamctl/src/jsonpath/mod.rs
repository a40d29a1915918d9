//! The part of kubectl's JSONPath that scripts use (`-o jsonpath=…`,
//! `-o custom-columns=…`, `--sort-by=…`):
//!
//! - templates: text with `{expression}`s, `{range EXPR}…{end}` (nested),
//!   string literals `{"\n"}` / `{'\t'}`; a template without `{` is one
//!   expression (`.metadata.name` = `{.metadata.name}`), as in kubectl;
//! - expressions: `$` (the root) or `@`/nothing (the current object), then
//!   `.field`, `['field.with.dots']`, `.*`, `[*]`, `[N]`, `[-1]`, `[a:b]`,
//!   `..field` (every descendant's field), and filters
//!   `[?(@.a.b == "x")]`, `[?(@.n > 2)]`, `[?(@.a)]`; `\.` escapes a dot in
//!   a field name (`.metadata.labels.app\.kubernetes\.io/name`).
//!
//! Results print as kubectl prints them: strings raw, everything else as
//! compact JSON; several results of one expression joined by a space. A
//! missing field prints nothing (kubectl's `--allow-missing-template-keys`
//! default).

use serde_json::Value;

use crate::error::{CliError, Result};

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Expr(Path),
    Range(Path, Vec<Part>),
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    from_root: bool,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    /// `..field`.
    Descendants(String),
    /// `.*` or `[*]`.
    All,
    Index(i64),
    Slice(Option<i64>, Option<i64>),
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
enum Filter {
    Exists(Path),
    Compare(Path, Op, Operand),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Literal(Value),
    Path(Path),
}

fn error(what: &str, text: &str, why: impl std::fmt::Display) -> CliError {
    CliError::usage(format!("{what} {text:?}: {why}"))
        .hint("e.g. '{.metadata.name}', '{.items[*].metadata.name}', '{range .items[*]}{.metadata.name}{\"\\n\"}{end}'")
}

impl Template {
    /// Parses a template (module doc).
    pub fn parse(text: &str) -> Result<Template> {
        let wrapped;
        let source = if text.contains('{') {
            text
        } else {
            wrapped = format!("{{{text}}}");
            &wrapped
        };
        let mut stack: Vec<(Path, Vec<Part>)> = Vec::new();
        let mut parts = Vec::new();
        let mut rest = source;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                parts.push(Part::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let body_start = &rest[open + 1..];
            let close =
                closing_brace(body_start).ok_or_else(|| error("jsonpath", text, "unclosed '{'"))?;
            let inner = body_start[..close].trim();
            rest = &body_start[close + 1..];
            if inner == "end" {
                let (path, outer) = stack
                    .pop()
                    .ok_or_else(|| error("jsonpath", text, "{end} without {range}"))?;
                let body = std::mem::replace(&mut parts, outer);
                parts.push(Part::Range(path, body));
            } else if let Some(expr) = inner.strip_prefix("range ") {
                let path = Path::parse(expr.trim()).map_err(|e| error("jsonpath", text, e))?;
                stack.push((path, std::mem::take(&mut parts)));
            } else if let Some(lit) = string_literal(inner) {
                parts.push(Part::Text(lit.map_err(|e| error("jsonpath", text, e))?));
            } else {
                let path = Path::parse(inner).map_err(|e| error("jsonpath", text, e))?;
                parts.push(Part::Expr(path));
            }
        }
        if !stack.is_empty() {
            return Err(error("jsonpath", text, "{range} without {end}"));
        }
        Ok(Template { parts })
    }

    /// Renders the template against `root`.
    pub fn render(&self, root: &Value) -> String {
        let mut out = String::new();
        render_parts(&self.parts, root, root, &mut out);
        out
    }
}

fn render_parts(parts: &[Part], root: &Value, current: &Value, out: &mut String) {
    for p in parts {
        match p {
            Part::Text(t) => out.push_str(t),
            Part::Expr(path) => {
                let found = path.eval(root, current);
                let texts: Vec<String> = found.into_iter().map(print).collect();
                out.push_str(&texts.join(" "));
            }
            Part::Range(path, body) => {
                for item in path.eval(root, current) {
                    render_parts(body, root, item, out);
                }
            }
        }
    }
}

/// How a result prints: strings raw, the rest as compact JSON.
pub fn print(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The index of the `}` closing an expression, skipping quoted strings.
fn closing_brace(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '}' => return Some(i),
                _ => {}
            },
        }
    }
    None
}

/// `"…"` or `'…'` with `\n \t \r \\ \" \'` escapes; `None` when `text` is
/// not a quoted string at all.
fn string_literal(text: &str) -> Option<std::result::Result<String, String>> {
    let q = text.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    if text.len() < 2 || !text.ends_with(q) {
        return Some(Err(format!("unterminated string {text}")));
    }
    Some(unescape(&text[1..text.len() - 1]))
}

fn unescape(body: &str) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(c @ ('\\' | '"' | '\'')) => out.push(c),
            other => return Err(format!("unknown escape \\{}", other.unwrap_or(' '))),
        }
    }
    Ok(out)
}

impl Path {
    /// Parses one expression (without braces; braces are allowed too, so
    /// `--sort-by='{.metadata.name}'` works as in kubectl).
    pub fn parse(text: &str) -> std::result::Result<Path, String> {
        let t = text.trim();
        let t = t
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(t)
            .trim();
        let mut p = Parser { s: t, pos: 0 };
        let path = p.path()?;
        if p.pos < p.s.len() {
            return Err(format!("unexpected {:?}", &p.s[p.pos..]));
        }
        Ok(path)
    }

    /// Every value the expression reaches from `current` (or the root).
    pub fn eval<'a>(&self, root: &'a Value, current: &'a Value) -> Vec<&'a Value> {
        let mut now = vec![if self.from_root { root } else { current }];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in now {
                step.apply(root, v, &mut next);
            }
            now = next;
        }
        now
    }
}

impl Step {
    fn apply<'a>(&self, root: &'a Value, v: &'a Value, out: &mut Vec<&'a Value>) {
        match self {
            Step::Field(name) => out.extend(v.as_object().and_then(|m| m.get(name))),
            Step::Descendants(name) => descendants(v, name, out),
            Step::All => match v {
                Value::Array(a) => out.extend(a.iter()),
                Value::Object(m) => out.extend(m.values()),
                _ => {}
            },
            Step::Index(i) => {
                if let Some(a) = v.as_array() {
                    let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                    if idx >= 0 {
                        out.extend(a.get(idx as usize));
                    }
                }
            }
            Step::Slice(from, to) => {
                if let Some(a) = v.as_array() {
                    let len = a.len() as i64;
                    let clamp = |i: i64| (if i < 0 { len + i } else { i }).clamp(0, len) as usize;
                    let (s, e) = (clamp(from.unwrap_or(0)), clamp(to.unwrap_or(len)));
                    if s < e {
                        out.extend(a[s..e].iter());
                    }
                }
            }
            Step::Filter(f) => {
                let items: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    Value::Object(m) => m.values().collect(),
                    _ => Vec::new(),
                };
                out.extend(items.into_iter().filter(|item| f.holds(root, item)));
            }
        }
    }
}

fn descendants<'a>(v: &'a Value, name: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if let Some(found) = m.get(name) {
                out.push(found);
            }
            for child in m.values() {
                descendants(child, name, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| descendants(c, name, out)),
        _ => {}
    }
}

impl Filter {
    fn holds(&self, root: &Value, item: &Value) -> bool {
        match self {
            Filter::Exists(p) => p
                .eval(root, item)
                .first()
                .is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false))),
            Filter::Compare(p, op, rhs) => {
                let Some(left) = p.eval(root, item).into_iter().next() else {
                    return false;
                };
                let right = match rhs {
                    Operand::Literal(v) => v,
                    Operand::Path(q) => match q.eval(root, item).into_iter().next() {
                        Some(v) => v,
                        None => return false,
                    },
                };
                let ord = compare(left, right);
                match op {
                    Op::Eq => left == right || ord == Some(std::cmp::Ordering::Equal),
                    Op::Ne => !(left == right || ord == Some(std::cmp::Ordering::Equal)),
                    Op::Lt => ord == Some(std::cmp::Ordering::Less),
                    Op::Le => ord.is_some_and(|o| o != std::cmp::Ordering::Greater),
                    Op::Gt => ord == Some(std::cmp::Ordering::Greater),
                    Op::Ge => ord.is_some_and(|o| o != std::cmp::Ordering::Less),
                }
            }
        }
    }
}

/// Orders two values of the same type: numbers numerically, strings and
/// booleans naturally; `None` across types.
pub fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

mod parser;

use parser::Parser;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({"apiVersion": "pam.dev/v1", "kind": "List", "items": [
            {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web", "tier": "fe"}},
             "status": {"phase": "running", "attempt": 2}},
            {"metadata": {"name": "b"}, "status": {"phase": "failed", "attempt": 10}},
            {"metadata": {"name": "c"}, "status": {"phase": "running", "attempt": 1}},
        ]})
    }

    fn render(t: &str, v: &Value) -> String {
        Template::parse(t).unwrap().render(v)
    }

    #[test]
    fn fields_wildcards_and_indexes() {
        let l = list();
        assert_eq!(render("{.kind}", &l), "List");
        assert_eq!(render(".kind", &l), "List");
        assert_eq!(render("{.items[*].metadata.name}", &l), "a b c");
        assert_eq!(render("{$.items[0].metadata.name}", &l), "a");
        assert_eq!(render("{.items[-1].metadata.name}", &l), "c");
        assert_eq!(render("{.items[0:2].metadata.name}", &l), "a b");
        assert_eq!(render("{.items[1:].status.attempt}", &l), "10 1");
        assert_eq!(
            render("{.items[0].status}", &l),
            r#"{"attempt":2,"phase":"running"}"#
        );
        assert_eq!(render("{.items[0].metadata.labels.tier}", &l), "fe");
        assert_eq!(
            render(r"{.items[0].metadata.labels.app\.kubernetes\.io/name}", &l),
            "web"
        );
        assert_eq!(
            render("{.items[0].metadata.labels['app.kubernetes.io/name']}", &l),
            "web"
        );
        assert_eq!(render("{..phase}", &l), "running failed running");
        assert_eq!(render("{.items[*].nope}", &l), "");
        assert_eq!(render("{.nope.deeper[3]}", &l), "");
        assert_eq!(render("name={.items[1].metadata.name}!", &l), "name=b!");
    }

    #[test]
    fn ranges_and_literals() {
        let l = list();
        assert_eq!(
            render(
                r#"{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}"#,
                &l
            ),
            "a\trunning\nb\tfailed\nc\trunning\n"
        );
        assert_eq!(
            render(
                "{range .items[*]}[{range .metadata.labels.*}{@}{','}{end}]{end}",
                &l
            ),
            "[web,fe,][][]"
        );
        assert_eq!(render("{'x'}{\"}\"}", &l), "x}");
    }

    #[test]
    fn filters() {
        let l = list();
        assert_eq!(
            render(
                r#"{.items[?(@.status.phase=="running")].metadata.name}"#,
                &l
            ),
            "a c"
        );
        assert_eq!(
            render("{.items[?(@.status.phase != 'running')].metadata.name}", &l),
            "b"
        );
        assert_eq!(
            render("{.items[?(@.status.attempt > 1)].metadata.name}", &l),
            "a b"
        );
        assert_eq!(
            render("{.items[?(@.status.attempt<=1)].metadata.name}", &l),
            "c"
        );
        assert_eq!(
            render("{.items[?(@.metadata.labels)].metadata.name}", &l),
            "a"
        );
    }

    #[test]
    fn bad_templates_are_usage_errors() {
        for bad in [
            "{.a",
            "{range .items[*]}{.x}",
            "{end}",
            "{.items[}",
            "{.items[x]}",
            r#"{"\q"}"#,
            "{.a b}",
            "{.items[?(@.a == )]}",
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage, "{bad}");
            assert!(e.message.starts_with("jsonpath "), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn paths_for_sort_and_columns() {
        let l = list();
        let p = Path::parse("{.items[1].metadata.name}").unwrap();
        assert_eq!(p.eval(&l, &l), [&json!("b")]);
        let p = Path::parse(".status.attempt").unwrap();
        assert_eq!(p.eval(&l, &l["items"][0]), [&json!(2)]);
        assert!(Path::parse(".a)").is_err());
    }
}
