//! The parser on the real CLI's captured output (`captures/claude/`).

use pam_manifests::protocol::EntryKind;

use crate::providers::replay::replay;
use crate::providers::ProviderKind;

fn claude(stdout: &str) -> crate::providers::replay::Replay {
    replay(ProviderKind::Claude, stdout, "")
}

#[test]
fn a_write_then_an_answer_reads_as_the_exchange_with_every_models_usage() {
    let r = claude(include_str!("../captures/claude/two-step-usage.jsonl"));
    assert_eq!(
        r.session_id.as_deref(),
        Some("50938134-7da5-450f-b3bc-d029a3ed1536")
    );
    let kinds: Vec<EntryKind> = r.entries.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EntryKind::Session,
            EntryKind::Message,
            EntryKind::ToolCall,
            EntryKind::ToolResult,
            EntryKind::Message,
            EntryKind::Usage,
            EntryKind::Result
        ]
    );
    let call = r.of(EntryKind::ToolCall)[0];
    assert_eq!(call.tool.as_deref(), Some("Write"));
    assert!(call.target.as_deref().unwrap().ends_with("/repo/hello.txt"));
    assert_eq!(r.of(EntryKind::ToolResult)[0].ok, Some(true));
    assert_eq!(
        r.of(EntryKind::ToolResult)[0].tool.as_deref(),
        Some("Write")
    );
    // modelUsage: the main model and the side (title) request, each once.
    let u = r.usage.clone().unwrap();
    assert_eq!(
        (u.input_tokens, u.cached_input_tokens, u.output_tokens),
        (1570 + 2100 + 120, 2100, 54 + 6)
    );
    assert_eq!(u.cost_usd, Some(0.0063));
    let models: Vec<&str> = u.by_model.iter().map(|m| m.model.as_str()).collect();
    assert_eq!(models, ["claude-haiku-4-5", "claude-sonnet-4-5"]);
    assert_eq!(u.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(r.final_result.clone().unwrap().success);
    assert!(r.of(EntryKind::Denied).is_empty());
}

/// While the run is live (before the result line), each API call counts
/// once with its true output: the partial messages' `message_delta`.
#[test]
fn live_usage_counts_each_call_once_with_its_delta() {
    let text = include_str!("../captures/claude/two-step-partial-messages.jsonl");
    let live: String = text
        .lines()
        .filter(|l| !l.contains(r#""type":"result""#))
        .map(|l| format!("{l}\n"))
        .collect();
    let u = claude(&live).usage.unwrap();
    assert_eq!(
        (u.input_tokens, u.cached_input_tokens, u.output_tokens),
        (1500 + 300 + 70 + 1800, 2100, 45 + 9)
    );
    // Without partial messages only the calls' starts are known: still
    // each call once, never once per content block.
    let plain = include_str!("../captures/claude/two-step-usage.jsonl");
    let live: String = plain
        .lines()
        .filter(|l| !l.contains(r#""type":"result""#))
        .map(|l| format!("{l}\n"))
        .collect();
    let u = claude(&live).usage.unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (1800 + 1870, 2));
}

#[test]
fn refusals_are_denied_entries_once_each() {
    for (capture, tool, target_end) in [
        (
            include_str!("../captures/claude/default-write-denied.jsonl"),
            "Write",
            "hello.txt",
        ),
        (
            include_str!("../captures/claude/accept-edits-bash-denied.jsonl"),
            "Bash",
            "print(42)'",
        ),
        (
            include_str!("../captures/claude/plan-mode.jsonl"),
            "Write",
            "hello.txt",
        ),
        (
            include_str!("../captures/claude/disallowed-write.jsonl"),
            "Write",
            "hello.txt",
        ),
    ] {
        let r = claude(capture);
        let denied = r.of(EntryKind::Denied);
        assert_eq!(denied.len(), 1, "{denied:?}");
        assert_eq!(denied[0].tool.as_deref(), Some(tool));
        assert!(
            denied[0].target.as_deref().unwrap().ends_with(target_end),
            "{denied:?}"
        );
        // The CLI calls it a success: the denial is what tells.
        assert!(r.final_result.clone().unwrap().success);
    }
    let ok = claude(include_str!(
        "../captures/claude/accept-edits-bash-allowed.jsonl"
    ));
    assert!(ok.of(EntryKind::Denied).is_empty());
}

#[test]
fn an_api_error_is_retries_then_the_apis_words_as_the_failure() {
    let r = claude(include_str!("../captures/claude/api-error-500.jsonl"));
    let retries = r.of(EntryKind::Retry);
    assert_eq!(retries.len(), 2);
    assert!(
        retries[1]
            .text
            .as_deref()
            .unwrap()
            .starts_with("retrying the API call, attempt 2 of 2: 500 server_error"),
        "{retries:?}"
    );
    let f = r.final_result.clone().unwrap();
    assert!(!f.success);
    assert!(
        f.text.starts_with("API Error: 500 Scripted error (500)"),
        "{}",
        f.text
    );
    assert!(r.of(EntryKind::Error).iter().all(|e| e
        .text
        .as_deref()
        .unwrap()
        .starts_with("API Error: 500")));
    assert!(
        r.of(EntryKind::Message).is_empty(),
        "the synthetic answer is an error, not a message"
    );
    let recovered = claude(include_str!(
        "../captures/claude/api-error-529-recovers.jsonl"
    ));
    assert_eq!(recovered.of(EntryKind::Retry).len(), 1);
    assert!(recovered.final_result.unwrap().success);
}

#[test]
fn a_resumed_session_keeps_its_id() {
    let r = claude(include_str!("../captures/claude/resume.jsonl"));
    assert!(r.session_id.is_some());
    assert!(r.final_result.clone().unwrap().success);
}
