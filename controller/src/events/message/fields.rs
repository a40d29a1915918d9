//! Reading an event's payload leniently (an older event may lack some
//! fields), and the small phrases the sentences share.

use serde_json::Value;

/// The payload's fields, read leniently (an older event may lack some).
pub(super) struct Fields<'a>(pub(super) &'a Value);

impl Fields<'_> {
    pub(super) fn s(&self, k: &str) -> Option<&str> {
        self.0.get(k).and_then(Value::as_str)
    }
    pub(super) fn n(&self, k: &str) -> Option<i64> {
        self.0.get(k).and_then(Value::as_i64)
    }
    pub(super) fn has(&self, k: &str) -> bool {
        self.0.get(k).is_some_and(|v| !v.is_null())
    }
    pub(super) fn list(&self, k: &str) -> &[Value] {
        self.0
            .get(k)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
    /// `kind/name` from the field holding the name.
    pub(super) fn obj(&self, kind: &str, name_field: &str) -> Option<String> {
        self.s(name_field).map(|n| format!("{kind}/{n}"))
    }
    /// ` ("Title")` when the field holds something.
    pub(super) fn quoted_title(&self, k: &str) -> String {
        self.s(k)
            .filter(|t| !t.is_empty())
            .map_or(String::new(), |t| format!(" ({t:?})"))
    }
    /// A failed attempt's [`Fields::attempt`], but ` (attempt 1, not
    /// restarted)` for a reason the restart policy never retries (the run
    /// never ran, or cannot run): no "of 3" that promises more attempts.
    /// restart_exhausted says its own end ("attempt 3 of 3").
    pub(super) fn failed_attempt(&self, cause: Option<&str>) -> String {
        use pam_manifests::state::FailureReason;
        let never = self
            .s("failure_reason")
            .or(cause)
            .and_then(|r| r.parse::<FailureReason>().ok())
            .is_some_and(|r| {
                !FailureReason::restartable(Some(r)) && r != FailureReason::RestartExhausted
            });
        match self.n("attempt") {
            Some(a) if never => format!(" (attempt {a}, not restarted)"),
            _ => self.attempt(),
        }
    }
    /// ` (attempt 2 of 3)`; ` (attempt 2)` without the maximum (events
    /// journaled before it was in the payload).
    pub(super) fn attempt(&self) -> String {
        match (self.n("attempt"), self.n("max_attempts")) {
            (Some(a), Some(m)) => format!(" (attempt {a} of {m})"),
            (Some(a), None) => format!(" (attempt {a})"),
            _ => String::new(),
        }
    }
}

/// `1 run`, `3 runs`.
pub(super) fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// An instance id shortened to its first 8 characters.
pub(super) fn short(id: Option<&str>) -> String {
    id.map_or("?".into(), |s| s.chars().take(8).collect())
}

pub(super) fn qualified(project: Option<&str>, name: Option<&str>) -> String {
    match project {
        Some(p) => format!("{p}/{}", name.unwrap_or("?")),
        None => name.unwrap_or("?").to_string(),
    }
}

/// `Task web/cart, Run web/r1`: the first five, then how many more.
pub(super) fn objects(list: &[Value]) -> String {
    let mut names: Vec<String> = list
        .iter()
        .take(5)
        .map(|o| {
            let f = Fields(o);
            format!(
                "{} {}",
                f.s("kind").unwrap_or("?"),
                qualified(f.s("project"), f.s("name"))
            )
        })
        .collect();
    if list.len() > 5 {
        names.push(format!("{} more", list.len() - 5));
    }
    names.join(", ")
}
