//! Usage and cost as pamctl prints them: the `-o wide`
//! columns, the `describe` line and `pamctl top`.

use pam_manifests::Kind;
use serde_json::Value;

use super::table::{cell, Table};

/// Where a kind keeps the figures its roll-up is ranked by (the
/// registry's `usage`: a run's total over every attempt, a task's and a
/// project's roll-up).
pub fn pointer(kind: Kind) -> Option<&'static str> {
    kind.info().usage
}

fn n(obj: &Value, p: &str) -> u64 {
    obj.pointer(p).and_then(Value::as_u64).unwrap_or(0)
}

/// Input plus output tokens at `base`, or 0.
pub fn tokens_at(obj: &Value, base: &str) -> u64 {
    n(obj, &format!("{base}/inputTokens")) + n(obj, &format!("{base}/outputTokens"))
}

/// Cost in dollars at `base`, or 0.
pub fn cost_at(obj: &Value, base: &str) -> f64 {
    obj.pointer(&format!("{base}/costUsd"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

/// `$0.0123`: four decimals, enough for one small run.
pub fn dollars(usd: f64) -> String {
    format!("${usd:.4}")
}

/// The TOKENS and COST cells of an object (`<none>` while nothing was
/// reported).
pub fn cells(kind: Kind, obj: &Value) -> [String; 2] {
    match pointer(kind).filter(|p| obj.pointer(p).is_some()) {
        Some(p) => [tokens_at(obj, p).to_string(), dollars(cost_at(obj, p))],
        None => ["<none>".into(), "<none>".into()],
    }
}

/// One line for `describe`: tokens in (cached) / out and cost at `base`.
pub fn line(obj: &Value, base: &str) -> String {
    format!(
        "{} tokens (in {}, cached {}, out {}), {}",
        tokens_at(obj, base),
        n(obj, &format!("{base}/inputTokens")),
        n(obj, &format!("{base}/cachedInputTokens")),
        n(obj, &format!("{base}/outputTokens")),
        dollars(cost_at(obj, base))
    )
}

/// `pamctl top`: the objects with usage, most expensive first (ties: more
/// tokens first, then by name), at most `limit`.
pub fn top(kind: Kind, items: &[Value], with_project: bool, limit: usize) -> Table {
    let Some(p) = pointer(kind) else {
        return Table::new(&["NAME"]);
    };
    let mut rows: Vec<&Value> = items.iter().filter(|o| o.pointer(p).is_some()).collect();
    rows.sort_by(|a, b| {
        cost_at(b, p)
            .total_cmp(&cost_at(a, p))
            .then(tokens_at(b, p).cmp(&tokens_at(a, p)))
            .then(cell(a, "/metadata/name").cmp(&cell(b, "/metadata/name")))
    });
    let mut headers = Vec::new();
    if with_project {
        headers.push("PROJECT");
    }
    headers.extend(["NAME", "COST", "TOKENS", "INPUT", "CACHED", "OUTPUT"]);
    let mut t = Table::new(&headers);
    for o in rows.into_iter().take(limit) {
        let mut row = Vec::new();
        if with_project {
            row.push(cell(o, "/metadata/project"));
        }
        row.extend([
            cell(o, "/metadata/name"),
            dollars(cost_at(o, p)),
            tokens_at(o, p).to_string(),
            n(o, &format!("{p}/inputTokens")).to_string(),
            n(o, &format!("{p}/cachedInputTokens")).to_string(),
            n(o, &format!("{p}/outputTokens")).to_string(),
        ]);
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(name: &str, cost: f64, tokens: u64) -> Value {
        json!({"metadata": {"name": name}, "status": {"usage": {
            "attempt": {"inputTokens": 0, "outputTokens": 0, "costUsd": 0.0},
            "total": {"inputTokens": tokens, "cachedInputTokens": 1, "outputTokens": 0, "costUsd": cost}
        }}})
    }

    #[test]
    fn top_ranks_by_cost_then_tokens_and_skips_runs_without_usage() {
        let items = [
            run("cheap", 0.01, 100),
            json!({"metadata": {"name": "none"}, "status": {}}),
            run("dear", 2.5, 10),
            run("tie", 0.01, 200),
        ];
        let text = top(Kind::Run, &items, false, 10).render();
        let names: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(names, ["dear", "tie", "cheap"], "{text}");
        assert!(text.contains("$2.5000"), "{text}");
        assert_eq!(top(Kind::Run, &items, false, 1).render().lines().count(), 2);
    }

    #[test]
    fn cells_and_line() {
        let r = run("a", 0.25, 30);
        assert_eq!(cells(Kind::Run, &r), ["30".to_string(), "$0.2500".into()]);
        assert_eq!(
            cells(Kind::Run, &json!({"status": {}})),
            ["<none>".to_string(), "<none>".into()]
        );
        assert_eq!(
            line(&r, "/status/usage/total"),
            "30 tokens (in 30, cached 1, out 0), $0.2500"
        );
    }
}
