//! kubectl-style tables: upper-case headers, columns padded with three
//! spaces, `<none>` for an empty cell.

use chrono::{DateTime, Utc};
use pam_manifests::kinds::columns::{Cell, Column, Derived};
use pam_manifests::Kind;
use serde_json::Value;

use super::age;

/// A table being built.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
        }
    }

    /// Whether the table has no rows but its header.
    pub fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Appends a column: its header and one cell per row, in row order.
    pub fn push_column(&mut self, header: &str, cells: impl IntoIterator<Item = String>) {
        let mut cells = cells.into_iter();
        for (i, row) in self.rows.iter_mut().enumerate() {
            row.push(if i == 0 {
                header.to_string()
            } else {
                cells.next().unwrap_or_default()
            });
        }
    }

    /// Renders with a trailing newline; the last column is not padded.
    pub fn render(&self) -> String {
        self.render_rows(true)
    }

    /// [`Table::render`], with or without the header row (`--no-headers`;
    /// the widths still count the header, so rows align with a headed
    /// table printed before, as `get -w` does).
    pub fn render_rows(&self, header: bool) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; cols];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in self.rows.iter().skip(usize::from(!header)) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    let pad = widths[i] - cell.chars().count() + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A string field, `<none>` when absent, null or empty.
pub fn cell(obj: &Value, pointer: &str) -> String {
    match obj.pointer(pointer) {
        None | Some(Value::Null) => "<none>".into(),
        Some(Value::String(s)) if s.is_empty() => "<none>".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The tasks a task waits for (`status.blockedBy`), comma-separated.
pub fn blocked_by(obj: &Value) -> String {
    let names = strings(obj, "/status/blockedBy");
    if names.is_empty() {
        "<none>".into()
    } else {
        names.join(",")
    }
}

fn completion(obj: &Value) -> String {
    let c = obj.pointer("/status/completion");
    match (
        c.and_then(|c| c.get("done")).and_then(Value::as_u64),
        c.and_then(|c| c.get("total")).and_then(Value::as_u64),
    ) {
        (Some(done), Some(total)) => format!("{done}/{total}"),
        _ => "<none>".into(),
    }
}

fn task_status(obj: &Value) -> String {
    match obj.pointer("/status/phase") {
        Some(Value::String(s)) => s.clone(),
        _ => cell(obj, "/spec/status"),
    }
}

/// A Source revision as people read it: 7 hex of the commit or the
/// `sha256:` hash (tables, `pamctl sync`, `pamctl diff source`).
pub fn short_rev(rev: &str) -> String {
    let hex = rev.strip_prefix("sha256:").unwrap_or(rev);
    hex.chars().take(7).collect()
}

/// A run's REASON and MESSAGE cells: a pending run's
/// `Scheduled=False` condition (why it waits), else its failure reason and
/// message.
pub fn run_reason(obj: &Value) -> (String, String) {
    let none = || "<none>".to_string();
    if obj.pointer("/status/phase").and_then(Value::as_str) == Some("pending") {
        return match condition(obj, "Scheduled", "False") {
            Some(c) => (cell(c, "/reason"), cell(c, "/message")),
            None => (none(), none()),
        };
    }
    // A run whose agent was refused tool calls never reads as a plain
    // success; a failure without one of the seed's reasons is an Error.
    let refused = condition(obj, "PermissionDenied", "True");
    let failed = obj.pointer("/status/phase").and_then(Value::as_str) == Some("failed");
    match (obj.pointer("/status/failureReason"), refused) {
        (Some(_), _) => (
            cell(obj, "/status/failureReason"),
            cell(obj, "/status/message"),
        ),
        (None, Some(c)) if !failed => (cell(c, "/reason"), cell(c, "/message")),
        (None, _) if failed => ("Error".into(), cell(obj, "/status/message")),
        (None, _) => (none(), cell(obj, "/status/message")),
    }
}

/// The object's condition of `type_` when its status is `status`.
fn condition<'a>(obj: &'a Value, type_: &str, status: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == type_ && c["status"] == status)
        })
}

/// A run's LAST ACTIVITY cell: its agent's newest step in words, cut to
/// a table's width.
pub fn last_activity(obj: &Value) -> String {
    obj.pointer("/status/lastActivity")
        .cloned()
        .and_then(|v| serde_json::from_value::<pam_manifests::protocol::Entry>(v).ok())
        .map(|e| pam_manifests::protocol::one_line(&e.describe(), 60))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into())
}

/// A host's PROVIDERS (`claude@2.1.0,exec`) and FREE (`12.0Gi`) cells from
/// `status.capabilities`; `<unreported>` from an older worker.
pub fn host_capabilities(obj: &Value) -> (String, String) {
    let Some(caps) = obj.pointer("/status/capabilities") else {
        return ("<unreported>".into(), "<none>".into());
    };
    let providers: Vec<String> = caps["providers"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| match p["version"].as_str() {
                    Some(v) => format!("{}@{v}", p["name"].as_str().unwrap_or("?")),
                    None => p["name"].as_str().unwrap_or("?").to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let free = caps["workspaceFreeBytes"]
        .as_u64()
        .map_or_else(|| "<none>".to_string(), bytes);
    let providers = if providers.is_empty() {
        "<none>".to_string()
    } else {
        providers.join(",")
    };
    (providers, free)
}

/// Bytes in binary units, one decimal: `512B`, `1.5Ki`, `12.0Gi`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["Ki", "Mi", "Gi", "Ti", "Pi"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1}{}", UNITS[unit])
}

/// The table for objects of one kind: NAME and the columns of its
/// registry row (`Kind::info().columns`). `with_project` adds a PROJECT
/// column (`-A`), like kubectl's NAMESPACE; `qualify` prints names as
/// `kind/name` (kubectl's form when several kinds are listed at once).
pub fn objects(
    kind: Kind,
    items: &[Value],
    wide: bool,
    with_project: bool,
    qualify: bool,
    now: DateTime<Utc>,
) -> Table {
    let columns: Vec<&Column> = kind
        .info()
        .columns
        .iter()
        .filter(|c| wide || !c.wide)
        .collect();
    let mut headers: Vec<&str> = Vec::new();
    if with_project {
        headers.push("PROJECT");
    }
    headers.push("NAME");
    headers.extend(columns.iter().map(|c| c.header));
    let mut t = Table::new(&headers);
    for o in items {
        let mut row = Vec::new();
        if with_project {
            row.push(cell(o, "/metadata/project"));
        }
        row.push(if qualify {
            super::name(kind, o)
        } else {
            cell(o, "/metadata/name")
        });
        row.extend(columns.iter().map(|c| column_cell(kind, c.cell, o, now)));
        t.row(row);
    }
    t
}

/// One cell of a registry column.
fn column_cell(kind: Kind, c: Cell, o: &Value, now: DateTime<Utc>) -> String {
    let at = |p: &str| o.pointer(p);
    match c {
        Cell::Text(p) => cell(o, p),
        Cell::Age => age::since(
            at("/metadata/creationTimestamp").and_then(Value::as_str),
            now,
        ),
        Cell::Flag(p) => at(p).and_then(Value::as_bool).unwrap_or(false).to_string(),
        Cell::Count(p) => at(p).and_then(Value::as_u64).unwrap_or(0).to_string(),
        Cell::Len(p) => at(p)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
            .to_string(),
        Cell::Since(p) => match at(p).and_then(Value::as_str) {
            Some(t) => age::since(Some(t), now),
            None => "<never>".into(),
        },
        Cell::Join(p) => strings(o, p).join(","),
        Cell::ShortRev(p) => short_rev(&cell(o, p)),
        Cell::Computed(d) => computed(kind, d, o),
    }
}

/// The strings of an array field (none when absent).
fn strings<'a>(o: &'a Value, p: &str) -> Vec<&'a str> {
    o.pointer(p)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn computed(kind: Kind, d: Derived, o: &Value) -> String {
    match d {
        Derived::TaskStatus => task_status(o),
        Derived::Completion => completion(o),
        Derived::BlockedBy => blocked_by(o),
        Derived::RunReason => run_reason(o).0,
        Derived::RunMessage => run_reason(o).1,
        Derived::LastActivity => last_activity(o),
        Derived::Providers => host_capabilities(o).0,
        Derived::Free => host_capabilities(o).1,
        Derived::Tokens => super::usage::cells(kind, o)[0].clone(),
        Derived::Cost => super::usage::cells(kind, o)[1].clone(),
        Derived::SecretKeys => {
            let names: Vec<&str> = secret_keys(o)
                .iter()
                .filter_map(|k| k.get("name").and_then(Value::as_str))
                .collect();
            if names.is_empty() {
                "<none>".to_string()
            } else {
                names.join(",")
            }
        }
        Derived::SecretSize => secret_keys(o)
            .iter()
            .filter_map(|k| k.get("size").and_then(Value::as_u64))
            .sum::<u64>()
            .to_string(),
    }
}

fn secret_keys(o: &Value) -> &[Value] {
    o.pointer("/status/keys")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_by_three_and_trailing_space_trimmed() {
        let mut t = Table::new(&["NAME", "PHASE", "X"]);
        t.row(vec!["a-long-name".into(), "ok".into(), "".into()]);
        assert_eq!(t.render(), "NAME          PHASE   X\na-long-name   ok\n");
    }
}
