//! The expression parser: `$`/`@`, `.field`, `..field`, `[…]` steps and
//! filters.

use serde_json::Value;

use super::{unescape, Filter, Op, Operand, Path, Step};

pub(super) struct Parser<'a> {
    pub(super) s: &'a str,
    pub(super) pos: usize,
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

    pub(super) fn path(&mut self) -> std::result::Result<Path, String> {
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
