//! Usage and cost as pamctl reads and prints them: the `-o wide` columns,
//! the `describe` line, and the figures `pamctl top` ranks by.

use pam_manifests::Kind;
use serde_json::Value;

/// Where a kind keeps the figures its roll-up is ranked by (the
/// registry's `usage`: a run's total over every attempt, a task's and a
/// project's roll-up).
pub fn pointer(kind: Kind) -> Option<&'static str> {
    kind.info().usage
}

/// The number at `p`, or 0.
pub fn n(obj: &Value, p: &str) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::render::samples::run_with_usage as run;

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
