//! The parser on the real CLI's captured output (`captures/codex/`).

use pam_manifests::protocol::EntryKind;

use crate::providers::replay::{replay, Replay};
use crate::providers::ProviderKind;

fn codex(stdout: &str, stderr: &str) -> Replay {
    replay(ProviderKind::Codex, stdout, stderr)
}

#[test]
fn a_write_and_a_command_read_as_calls_with_results_and_the_turns_usage() {
    let r = codex(include_str!("../captures/codex/workspace-write.jsonl"), "");
    assert_eq!(
        r.session_id.as_deref(),
        Some("01a25251-a1bc-7422-bee5-f98e994b7fed")
    );
    let calls = r.of(EntryKind::ToolCall);
    assert_eq!(
        calls.len(),
        2,
        "started items are not repeated when they complete"
    );
    assert_eq!(calls[0].tool.as_deref(), Some("apply_patch"));
    assert!(calls[0]
        .target
        .as_deref()
        .unwrap()
        .ends_with("/repo/hello.txt"));
    assert_eq!(calls[1].tool.as_deref(), Some("shell"));
    assert_eq!(
        calls[1].target.as_deref(),
        Some("cat hello.txt && touch made-by-shell.txt && ls")
    );
    assert!(r
        .of(EntryKind::ToolResult)
        .iter()
        .all(|e| e.ok == Some(true)));
    assert_eq!(
        r.of(EntryKind::Message)[0].text.as_deref(),
        Some("Finished.")
    );
    let u = r.usage.clone().unwrap();
    assert_eq!(
        (u.input_tokens, u.cached_input_tokens, u.output_tokens),
        (3690, 2100, 68)
    );
    let f = r.final_result.clone().unwrap();
    assert!(f.success);
    assert_eq!(f.text, "Finished.");
}

#[test]
fn sandbox_refusals_are_denied_from_the_item_or_the_log() {
    let item = codex(
        include_str!("../captures/codex/workspace-write-outside-item-race.jsonl"),
        "",
    );
    let denied = item.of(EntryKind::Denied);
    assert_eq!(denied.len(), 1);
    assert_eq!(
        denied[0].target.as_deref(),
        Some("touch /var/tmp/pam-codex-outside.txt")
    );
    let log = codex(
        include_str!("../captures/codex/read-only-write.jsonl"),
        include_str!("../captures/codex/read-only-write.stderr"),
    );
    let denied = log.of(EntryKind::Denied);
    assert_eq!(denied.len(), 1, "{:?}", log.entries);
    assert_eq!(denied[0].tool.as_deref(), Some("apply_patch"));
    assert!(denied[0]
        .text
        .as_deref()
        .unwrap()
        .contains("blocked by read-only sandbox"));
}

#[test]
fn api_errors_are_retries_then_the_failure_in_the_apis_words() {
    let r = codex(include_str!("../captures/codex/api-error-500.jsonl"), "");
    assert_eq!(r.of(EntryKind::Retry).len(), 1);
    let f = r.final_result.clone().unwrap();
    assert!(!f.success);
    assert!(f.text.contains("high demand"), "{}", f.text);
    let r = codex(include_str!("../captures/codex/api-error-400.jsonl"), "");
    assert_eq!(r.final_result.clone().unwrap().text, "Scripted error (400)");
}

#[test]
fn no_repository_is_only_a_log_line() {
    let r = codex(
        include_str!("../captures/codex/no-git-repo.jsonl"),
        include_str!("../captures/codex/no-git-repo.stderr"),
    );
    assert!(r.final_result.is_none() && r.entries.is_empty());
    let r = codex(
        include_str!("../captures/codex/no-git-repo-skip-check.jsonl"),
        "",
    );
    assert!(r.final_result.clone().unwrap().success);
}
