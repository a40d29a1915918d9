//! `-o` and the column habits of kubectl's `get`: `-o jsonpath=…`,
//! `-o custom-columns=HEADER:PATH,…`, `-L key` label columns,
//! `--show-labels`, `--sort-by=PATH`.

use serde_json::Value;

use super::table::Table;
use crate::jsonpath::{self, Path, Template};

/// `-o`: how `get` prints.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Table,
    Wide,
    Yaml,
    Json,
    Name,
    /// `jsonpath=TEMPLATE`: the template against the object (one named
    /// object) or the `List`.
    JsonPath(Template),
    /// `custom-columns=HEADER:PATH,…`: one row per object.
    CustomColumns(Vec<Column>),
}

/// What `-o` accepts, for errors and help.
pub const FORMATS: &str =
    "table, wide, yaml, json, name, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,…";

impl Output {
    /// Parses `-o` (clap's value parser).
    pub fn parse(text: &str) -> Result<Output, String> {
        let simple = match text {
            "table" => Some(Output::Table),
            "wide" => Some(Output::Wide),
            "yaml" => Some(Output::Yaml),
            "json" => Some(Output::Json),
            "name" => Some(Output::Name),
            _ => None,
        };
        if let Some(o) = simple {
            return Ok(o);
        }
        let usage = |e: crate::error::CliError| {
            let mut lines = vec![e.message];
            lines.extend(e.hints.into_iter().map(|h| format!("hint: {h}")));
            lines.join("\n")
        };
        if let Some(t) = text.strip_prefix("jsonpath=") {
            return Template::parse(t).map(Output::JsonPath).map_err(usage);
        }
        if let Some(spec) = text.strip_prefix("custom-columns=") {
            return parse_columns(spec).map(Output::CustomColumns);
        }
        Err(format!(
            "unknown output format {text:?}; expected {FORMATS}"
        ))
    }

    /// Whether this prints a table (so `--no-headers`, `-L`,
    /// `--show-labels` apply and an empty list is a note, not data).
    pub fn is_table(&self) -> bool {
        matches!(
            self,
            Output::Table | Output::Wide | Output::CustomColumns(_)
        )
    }
}

/// One `-o custom-columns` column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub header: String,
    pub path: Path,
}

/// Splits at commas outside brackets, parentheses and quotes (a filter
/// or a quoted key may hold one).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '(' | '{') => depth += 1,
            (None, ']' | ')' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Parses `HEADER:PATH,HEADER:PATH`.
pub fn parse_columns(spec: &str) -> Result<Vec<Column>, String> {
    let hint = "expected custom-columns=HEADER:PATH[,HEADER:PATH…], e.g. custom-columns=NAME:.metadata.name,PHASE:.status.phase";
    if spec.trim().is_empty() {
        return Err(format!("custom-columns is empty; {hint}"));
    }
    split_top_level(spec)
        .into_iter()
        .map(|part| {
            let (header, path) = part
                .split_once(':')
                .filter(|(h, p)| !h.is_empty() && !p.is_empty())
                .ok_or_else(|| format!("custom-columns {part:?}: {hint}"))?;
            let path =
                Path::parse(path).map_err(|e| format!("custom-columns {part:?}: bad path: {e}"))?;
            Ok(Column {
                header: header.to_string(),
                path,
            })
        })
        .collect()
}

/// The `-o custom-columns` table: each cell the path's results joined by
/// `,`, `<none>` when there are none.
pub fn custom_table(columns: &[Column], items: &[Value]) -> Table {
    let headers: Vec<&str> = columns.iter().map(|c| c.header.as_str()).collect();
    let mut t = Table::new(&headers);
    for o in items {
        t.row(
            columns
                .iter()
                .map(|c| {
                    let found = c.path.eval(o, o);
                    if found.iter().all(|v| v.is_null()) {
                        "<none>".to_string()
                    } else {
                        found
                            .into_iter()
                            .map(jsonpath::print)
                            .collect::<Vec<_>>()
                            .join(",")
                    }
                })
                .collect(),
        );
    }
    t
}

/// kubectl's header for `-L key`: the part after the last `/`, upper-case.
pub fn label_header(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_ascii_uppercase()
}

/// The labels selectors match: a host's one label set (`status.labels`:
/// its metadata labels with the labels it brings), else `metadata.labels`.
fn labels_of(o: &Value) -> Option<&Value> {
    o.pointer("/status/labels")
        .or_else(|| o.pointer("/metadata/labels"))
}

fn label_value(o: &Value, key: &str) -> String {
    labels_of(o)
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `--show-labels`' cell: `k=v,k2=v2` in key order, `<none>` when empty.
pub fn labels_cell(o: &Value) -> String {
    let mut pairs: Vec<String> = labels_of(o)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// Appends the `-L` columns, then LABELS for `--show-labels`, as kubectl.
pub fn add_label_columns(t: &mut Table, items: &[Value], keys: &[String], show_labels: bool) {
    for key in keys {
        t.push_column(
            &label_header(key),
            items.iter().map(|o| label_value(o, key)),
        );
    }
    if show_labels {
        t.push_column("LABELS", items.iter().map(labels_cell));
    }
}

/// Sorts objects by a path's first result (`--sort-by`): numbers
/// numerically, strings in byte order; objects without the field first.
/// Stable, so ties keep the server's order.
pub fn sort_by(items: &mut [Value], path: &Path) {
    let key = |o: &Value| path.eval(o, o).into_iter().next().cloned();
    items.sort_by(|a, b| match (key(a), key(b)) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => {
            jsonpath::compare(&x, &y).unwrap_or_else(|| x.to_string().cmp(&y.to_string()))
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_forms() {
        assert_eq!(Output::parse("wide").unwrap(), Output::Wide);
        assert!(matches!(
            Output::parse("jsonpath={.items[*].metadata.name}").unwrap(),
            Output::JsonPath(_)
        ));
        let Output::CustomColumns(cols) =
            Output::parse("custom-columns=NAME:.metadata.name,SEL:.metadata.labels['a,b']")
                .unwrap()
        else {
            panic!("not columns")
        };
        assert_eq!(cols.len(), 2);
        assert_eq!(cols[1].header, "SEL");
        let e = Output::parse("xml").unwrap_err();
        assert!(e.starts_with("unknown output format \"xml\""), "{e}");
        assert!(Output::parse("custom-columns=NAME")
            .unwrap_err()
            .contains("HEADER:PATH"));
        assert!(Output::parse("jsonpath={.a")
            .unwrap_err()
            .contains("unclosed"));
    }

    #[test]
    fn custom_columns_and_labels() {
        let items = vec![
            json!({"metadata": {"name": "a", "labels": {"tier": "fe", "app.kubernetes.io/name": "web"}},
                   "status": {"conditions": [{"type": "Ready"}, {"type": "Done"}]}}),
            json!({"metadata": {"name": "b"}, "status": {}}),
        ];
        let cols = parse_columns("NAME:.metadata.name,CONDS:.status.conditions[*].type").unwrap();
        let mut t = custom_table(&cols, &items);
        add_label_columns(&mut t, &items, &["app.kubernetes.io/name".into()], true);
        insta::assert_snapshot!(t.render(), @r"
        NAME   CONDS        NAME   LABELS
        a      Ready,Done   web    app.kubernetes.io/name=web,tier=fe
        b      <none>              <none>
        ");
        assert_eq!(
            t.render_rows(false)
                .lines()
                .next()
                .unwrap()
                .split_whitespace()
                .next(),
            Some("a")
        );
    }

    #[test]
    fn sort_by_numbers_strings_and_missing() {
        let mut items = vec![
            json!({"n": "b", "a": 10}),
            json!({"n": "c"}),
            json!({"n": "a", "a": 9}),
        ];
        sort_by(&mut items, &Path::parse(".a").unwrap());
        let names: Vec<&str> = items.iter().map(|o| o["n"].as_str().unwrap()).collect();
        assert_eq!(names, ["c", "a", "b"]);
        sort_by(&mut items, &Path::parse("{.n}").unwrap());
        let names: Vec<&str> = items.iter().map(|o| o["n"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
