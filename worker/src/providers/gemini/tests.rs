//! The parser on the real CLI's captured output (`captures/gemini/`).

use pam_manifests::protocol::EntryKind;

use crate::providers::replay::{replay, Replay};
use crate::providers::ProviderKind;

fn gemini(stdout: &str, stderr: &str) -> Replay {
    replay(ProviderKind::Gemini, stdout, stderr)
}

#[test]
fn a_write_and_a_command_read_as_calls_with_results_and_every_models_usage() {
    let r = gemini(
        include_str!("../captures/gemini/yolo-write-and-shell.jsonl"),
        "",
    );
    assert_eq!(
        r.session_id.as_deref(),
        Some("b1708f24-e26e-4beb-a494-5d798940f899")
    );
    let calls = r.of(EntryKind::ToolCall);
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_deref().unwrap()).collect();
    assert_eq!(tools, ["write_file", "run_shell_command"]);
    assert_eq!(
        calls[1].target.as_deref(),
        Some("cat hello.txt && touch made-by-shell.txt")
    );
    let results = r.of(EntryKind::ToolResult);
    assert_eq!(results[1].tool.as_deref(), Some("run_shell_command"));
    assert_eq!(results[1].text.as_deref(), Some("hello from pam"));
    // The echoed prompt is not a second user message.
    let messages = r.of(EntryKind::Message);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].role.as_deref(), Some("assistant"));
    let u = r.usage.clone().unwrap();
    assert_eq!(
        (u.input_tokens, u.cached_input_tokens, u.output_tokens),
        (3697, 2100, 71)
    );
    assert_eq!(u.model.as_deref(), Some("gemini-3.8-flash"));
    assert_eq!(u.by_model.len(), 2);
    assert!(r.final_result.clone().unwrap().success);
}

#[test]
fn refusals_by_mode_and_by_policy_are_denied() {
    for (capture, tool) in [
        (
            include_str!("../captures/gemini/default-write.jsonl"),
            "write_file",
        ),
        (
            include_str!("../captures/gemini/default-shell.jsonl"),
            "run_shell_command",
        ),
        (
            include_str!("../captures/gemini/allowed-tools-shell-denied.jsonl"),
            "run_shell_command",
        ),
    ] {
        let r = gemini(capture, "");
        let denied = r.of(EntryKind::Denied);
        assert_eq!(denied.len(), 1, "{:?}", r.entries);
        assert_eq!(denied[0].tool.as_deref(), Some(tool));
        assert!(
            r.final_result.clone().unwrap().success,
            "the CLI calls it a success"
        );
    }
    assert!(
        gemini(include_str!("../captures/gemini/auto_edit-write.jsonl"), "")
            .of(EntryKind::Denied)
            .is_empty()
    );
}

#[test]
fn an_api_error_is_retries_from_the_log_then_the_apis_words() {
    let r = gemini(
        include_str!("../captures/gemini/api-error-500.jsonl"),
        include_str!("../captures/gemini/api-error-500.stderr"),
    );
    let f = r.final_result.clone().unwrap();
    assert!(!f.success);
    assert_eq!(f.text, "API Error 500: Scripted error (500)");
    let retries = r.of(EntryKind::Retry);
    assert_eq!(retries.len(), 1, "{:?}", r.entries);
    assert_eq!(
        retries[0].text.as_deref(),
        Some("retrying the API call after attempt 1: 500")
    );
}
