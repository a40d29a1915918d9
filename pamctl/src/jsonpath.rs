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

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s[self.pos..].chars().next()
    }

    fn eat(&mut self, prefix: &str) -> bool {
        if self.s[self.pos..].starts_with(prefix) {
            self.pos += prefix.len();
            true
        } else {
            false
        }
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn path(&mut self) -> std::result::Result<Path, String> {
        let from_root = self.eat("$");
        if !from_root {
            self.eat("@");
        }
        let mut steps = Vec::new();
        loop {
            if self.eat("..") {
                let name = self.name()?;
                steps.push(Step::Descendants(name));
            } else if self.eat(".") {
                if self.eat("*") {
                    steps.push(Step::All);
                } else if self.peek() == Some('[') || self.peek().is_none() {
                    // `.` alone (the current object), or `.[0]`.
                } else {
                    steps.push(Step::Field(self.name()?));
                }
            } else if self.eat("[") {
                steps.push(self.bracket()?);
            } else {
                break;
            }
        }
        Ok(Path { from_root, steps })
    }

    /// A field name: up to `.`, `[`, space or an operator; `\.` escapes.
    fn name(&mut self) -> std::result::Result<String, String> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' {
                self.pos += 1;
                match self.peek() {
                    Some(n) => {
                        out.push(n);
                        self.pos += n.len_utf8();
                    }
                    None => return Err("a trailing backslash".into()),
                }
                continue;
            }
            if matches!(c, '.' | '[' | ']' | '(' | ')' | '=' | '!' | '<' | '>' | ',')
                || c.is_whitespace()
            {
                break;
            }
            out.push(c);
            self.pos += c.len_utf8();
        }
        if out.is_empty() {
            return Err(format!(
                "expected a field name at {:?}",
                &self.s[self.pos..]
            ));
        }
        Ok(out)
    }

    /// After `[`: `*`, `N`, `a:b`, `'name'`, `?(filter)`; consumes `]`.
    fn bracket(&mut self) -> std::result::Result<Step, String> {
        self.skip_ws();
        let step = if self.eat("*") {
            Step::All
        } else if self.eat("?(") {
            let f = self.filter()?;
            self.skip_ws();
            if !self.eat(")") {
                return Err("expected ')' closing the filter".into());
            }
            Step::Filter(f)
        } else if matches!(self.peek(), Some('"' | '\'')) {
            match self.literal()? {
                Value::String(s) => Step::Field(s),
                _ => unreachable!("a quoted literal is a string"),
            }
        } else {
            let end = self.s[self.pos..].find(']').ok_or("expected ']'")?;
            let inner = self.s[self.pos..self.pos + end].trim().to_string();
            self.pos += end;
            let int = |t: &str| -> std::result::Result<Option<i64>, String> {
                let t = t.trim();
                if t.is_empty() {
                    Ok(None)
                } else {
                    t.parse().map(Some).map_err(|_| format!("bad index {t:?}"))
                }
            };
            match inner.split_once(':') {
                Some((a, b)) => Step::Slice(int(a)?, int(b.split(':').next().unwrap_or(""))?),
                None => Step::Index(int(&inner)?.ok_or("empty index []")?),
            }
        };
        self.skip_ws();
        if !self.eat("]") {
            return Err("expected ']'".into());
        }
        Ok(step)
    }

    fn filter(&mut self) -> std::result::Result<Filter, String> {
        self.skip_ws();
        let left = self.path()?;
        self.skip_ws();
        let op = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find(|(t, _)| self.eat(t))
        .map(|(_, op)| op);
        let Some(op) = op else {
            return Ok(Filter::Exists(left));
        };
        self.skip_ws();
        let right = match self.peek() {
            Some('@' | '$') => Operand::Path(self.path()?),
            _ => Operand::Literal(self.literal()?),
        };
        Ok(Filter::Compare(left, op, right))
    }

    /// A quoted string, a number, `true`, `false` or `null`.
    fn literal(&mut self) -> std::result::Result<Value, String> {
        let rest = &self.s[self.pos..];
        if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
            let close = closing_quote(&rest[1..], q).ok_or("unterminated string")?;
            let body = &rest[1..1 + close];
            self.pos += close + 2;
            return unescape(body).map(Value::String);
        }
        let end = rest
            .find(|c: char| c == ')' || c == ']' || c.is_whitespace())
            .unwrap_or(rest.len());
        let word = &rest[..end];
        let v = match word {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            w => serde_json::from_str::<serde_json::Number>(w)
                .map(Value::Number)
                .map_err(|_| format!("expected a quoted string or a number, got {w:?}"))?,
        };
        self.pos += end;
        Ok(v)
    }
}

fn closing_quote(text: &str, q: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == q {
            return Some(i);
        }
    }
    None
}

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
