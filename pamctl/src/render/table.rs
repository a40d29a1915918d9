//! kubectl-style tables: upper-case headers, columns padded with three
//! spaces, `<none>` for an empty cell.

use chrono::{DateTime, Utc};
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

/// The tasks a task waits for (`status.blockedBy`, issue 17), comma-separated.
pub fn blocked_by(obj: &Value) -> String {
    let names: Vec<&str> = obj
        .pointer("/status/blockedBy")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
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

/// A revision as `git log --oneline` shows it: 7 hex digits (a directory's
/// `sha256:` hash too).
fn short_revision(obj: &Value, at: &str) -> String {
    short_rev(&cell(obj, at))
}

/// A Source revision as people read it: 7 hex of the commit or the
/// `sha256:` hash (tables, `pamctl sync`, `pamctl diff source`).
pub fn short_rev(rev: &str) -> String {
    let hex = rev.strip_prefix("sha256:").unwrap_or(rev);
    hex.chars().take(7).collect()
}

/// A run's REASON and MESSAGE cells (issue 31): a pending run's
/// `Scheduled=False` condition (why it waits), else its failure reason and
/// message.
pub fn run_reason(obj: &Value) -> (String, String) {
    let none = || "<none>".to_string();
    if obj.pointer("/status/phase").and_then(Value::as_str) == Some("pending") {
        let scheduled = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c["type"] == "Scheduled" && c["status"] == "False")
            });
        return match scheduled {
            Some(c) => (cell(c, "/reason"), cell(c, "/message")),
            None => (none(), none()),
        };
    }
    (
        cell(obj, "/status/failureReason"),
        cell(obj, "/status/message"),
    )
}

/// A host's PROVIDERS (`claude@2.1.0,exec`) and FREE (`12.0Gi`) cells from
/// `status.capabilities` (issue 31); `<unreported>` from an older worker.
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

fn host_phase(obj: &Value) -> String {
    cell(obj, "/status/phase")
}

/// The table for objects of one kind. `with_project` adds a PROJECT column
/// (`-A`), like kubectl's NAMESPACE; `qualify` prints names as
/// `kind/name` (kubectl's form when several kinds are listed at once).
pub fn objects(
    kind: Kind,
    items: &[Value],
    wide: bool,
    with_project: bool,
    qualify: bool,
    now: DateTime<Utc>,
) -> Table {
    let mut headers: Vec<&str> = Vec::new();
    if with_project {
        headers.push("PROJECT");
    }
    headers.push("NAME");
    let created = |o: &Value| {
        age::since(
            o.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str),
            now,
        )
    };
    match kind {
        Kind::Task => {
            headers.extend(["TYPE", "STATUS", "PARENT", "AGE"]);
            if wide {
                headers.extend([
                    "PATH",
                    "COMPLETION",
                    "ASSIGNEE",
                    "TOKENS",
                    "COST",
                    "BLOCKED-BY",
                ]);
            }
        }
        Kind::Run => {
            headers.extend(["PHASE", "ATTEMPT", "HOST", "PROVIDER", "REASON", "AGE"]);
            if wide {
                headers.extend(["SESSION", "EXIT", "MESSAGE", "TASK", "TOKENS", "COST"]);
            }
        }
        Kind::Host => {
            headers.extend(["PHASE", "RUNNING", "CAPACITY", "LAST-SEEN"]);
            if wide {
                headers.extend(["SUSPECT", "PLATFORM", "PROVIDERS", "FREE"]);
            }
        }
        Kind::Project => {
            headers.extend(["STATUS", "AGE"]);
            if wide {
                headers.extend(["TOKENS", "COST"]);
            }
        }
        Kind::Webhook => {
            headers.extend(["URL", "TOPICS", "PENDING", "FAILED", "AGE"]);
            if wide {
                headers.extend(["PROJECTS"]);
            }
        }
        Kind::Schedule => {
            headers.extend(["SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "NEXT", "AGE"]);
            if wide {
                headers.extend(["TIMEZONE", "POLICY", "LAST-RESULT"]);
            }
        }
        Kind::Secret => {
            headers.extend(["KEYS", "AGE"]);
            if wide {
                headers.extend(["SIZE", "KEY-ID"]);
            }
        }
        Kind::Source => {
            // Issue 35: Flux's `get sources` columns.
            headers.extend([
                "SUSPENDED",
                "REVISION",
                "ATTEMPTED",
                "SYNC",
                "HEALTH",
                "AGE",
            ]);
            if wide {
                headers.extend(["INVENTORY", "LAST-SYNCED", "MESSAGE"]);
            }
        }
    }
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
        match kind {
            Kind::Task => {
                row.extend([
                    cell(o, "/spec/type"),
                    task_status(o),
                    cell(o, "/spec/parent"),
                    created(o),
                ]);
                if wide {
                    let [tokens, cost] = super::usage::cells(kind, o);
                    row.extend([
                        cell(o, "/status/path"),
                        completion(o),
                        cell(o, "/spec/assignee"),
                        tokens,
                        cost,
                        blocked_by(o),
                    ]);
                }
            }
            Kind::Run => {
                let (reason, message) = run_reason(o);
                row.extend([
                    cell(o, "/status/phase"),
                    cell(o, "/status/attempt"),
                    cell(o, "/status/host"),
                    cell(o, "/spec/provider"),
                    reason,
                    created(o),
                ]);
                if wide {
                    row.extend([
                        cell(o, "/status/sessionName"),
                        cell(o, "/status/exitCode"),
                        message,
                        cell(o, "/spec/task"),
                    ]);
                    row.extend(super::usage::cells(kind, o));
                }
            }
            Kind::Host => {
                let last_seen = match o.pointer("/status/lastSeenAt").and_then(Value::as_str) {
                    Some(t) => age::since(Some(t), now),
                    None => "<never>".into(),
                };
                let running = o
                    .pointer("/status/runningRuns")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .to_string();
                row.extend([host_phase(o), running, cell(o, "/spec/capacity"), last_seen]);
                if wide {
                    let suspect = o
                        .pointer("/status/instanceSuspect")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    let (providers, free) = host_capabilities(o);
                    row.extend([
                        suspect.to_string(),
                        cell(o, "/spec/platform"),
                        providers,
                        free,
                    ]);
                }
            }
            Kind::Project => {
                row.extend([cell(o, "/status/phase"), created(o)]);
                if wide {
                    row.extend(super::usage::cells(kind, o));
                }
            }
            Kind::Webhook => {
                let list = |p: &str| {
                    o.pointer(p)
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default()
                };
                row.extend([
                    cell(o, "/spec/url"),
                    list("/spec/topics"),
                    cell(o, "/status/pending"),
                    cell(o, "/status/failed"),
                    created(o),
                ]);
                if wide {
                    row.push(list("/spec/projects"));
                }
            }
            Kind::Schedule => {
                let when = |p: &str| match o.pointer(p).and_then(Value::as_str) {
                    Some(t) => t.to_string(),
                    None => "<none>".into(),
                };
                let active = o
                    .pointer("/status/active")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let suspend = o
                    .pointer("/spec/suspend")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                row.extend([
                    cell(o, "/spec/schedule"),
                    suspend.to_string(),
                    active.to_string(),
                    when("/status/lastScheduleTime"),
                    when("/status/nextScheduleTime"),
                    created(o),
                ]);
                if wide {
                    row.extend([
                        cell(o, "/spec/timeZone"),
                        cell(o, "/spec/concurrencyPolicy"),
                        cell(o, "/status/lastResult"),
                    ]);
                }
            }
            Kind::Secret => {
                // Keys only: a Secret's values never reach pamctl.
                let keys = o
                    .pointer("/status/keys")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let names: Vec<&str> = keys
                    .iter()
                    .filter_map(|k| k.get("name").and_then(Value::as_str))
                    .collect();
                row.extend([
                    if names.is_empty() {
                        "<none>".to_string()
                    } else {
                        names.join(",")
                    },
                    created(o),
                ]);
                if wide {
                    let size: u64 = keys
                        .iter()
                        .filter_map(|k| k.get("size").and_then(Value::as_u64))
                        .sum();
                    row.extend([size.to_string(), cell(o, "/status/keyId")]);
                }
            }
            Kind::Source => {
                let suspended = o.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
                row.extend([
                    suspended.to_string(),
                    short_revision(o, "/status/revision"),
                    short_revision(o, "/status/attemptedRevision"),
                    cell(o, "/status/sync"),
                    cell(o, "/status/health"),
                    created(o),
                ]);
                if wide {
                    let synced = o.pointer("/status/lastSyncedAt").and_then(Value::as_str);
                    row.extend([
                        cell(o, "/status/inventory"),
                        synced.map_or("<never>".into(), |t| age::since(Some(t), now)),
                        cell(o, "/status/syncMessage"),
                    ]);
                }
            }
        }
        t.row(row);
    }
    t
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
