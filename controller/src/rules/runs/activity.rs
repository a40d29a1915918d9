//! What a run's agent did, in words: the refused tool calls of its
//! current attempt ([`Denials`]) as its `PermissionDenied` condition, and
//! the same sentence in `run.finished` (one home for the words).

use pam_manifests::conditions::PERMISSION_DENIED;
use pam_store::{Denials, Meta};

/// `the agent was refused 2 tool calls: Write hello.txt; Bash rm -rf x`
/// (the kept ones; `…` when more were refused than kept).
pub fn denied_words(d: &Denials) -> String {
    let calls: Vec<String> = d
        .items
        .iter()
        .map(|i| match &i.target {
            Some(t) => format!("{} {t}", i.tool),
            None => i.tool.clone(),
        })
        .collect();
    let more = if (d.count as usize) > d.items.len() {
        "; …"
    } else {
        ""
    };
    let plural = if d.count == 1 { "" } else { "s" };
    format!(
        "the agent was refused {} tool call{plural} by the run's permissions: {}{more}",
        d.count,
        calls.join("; ")
    )
}

/// Adds the `PermissionDenied` condition (True) that `d` implies, derived
/// when the run is read, as its time the first refusal's.
pub fn with_denied_condition(m: &mut Meta, d: &Denials) {
    crate::rules::meta::set_condition(
        m,
        PERMISSION_DENIED,
        true,
        PERMISSION_DENIED,
        &denied_words(d),
        d.since,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use pam_store::Denied;

    #[test]
    fn the_words_name_tools_and_targets_and_say_when_more_were_refused() {
        let d = Denials {
            count: 3,
            items: vec![
                Denied {
                    tool: "Write".into(),
                    target: Some("hello.txt".into()),
                },
                Denied {
                    tool: "WebFetch".into(),
                    target: None,
                },
            ],
            since: chrono::Utc::now(),
        };
        assert_eq!(
            denied_words(&d),
            "the agent was refused 3 tool calls by the run's permissions: Write hello.txt; WebFetch; …"
        );
    }
}
