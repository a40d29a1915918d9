//! `transcript RUN [--attempt N] [-f] [-o json]`: what the agent did, from
//! the attempt's normalized transcript (`GET …/runs/{name}/transcript`,
//! one activity entry a line), read like `logs` (see its module doc for
//! `-f`).
//!
//! By default a conversation for people, one block per entry: the model's
//! and the prompt's messages, each tool call (name, target, input), its
//! result (ok or failed, an excerpt), errors, retries, denials, the usage
//! of each step and the final result. `-o json` prints the entries as
//! they are, one JSON object a line. A line that is not an entry (a newer
//! worker's) is printed as it is.

use pam_manifests::protocol::{Entry, EntryKind};

use super::logs::{read, Read};
use crate::error::{CliError, Exit, Result};
use crate::{term, Ctx};

/// The longest excerpt of a tool result printed (characters).
const EXCERPT: usize = 400;

pub(crate) fn transcript(
    ctx: &mut Ctx,
    run: &str,
    attempt: Option<u32>,
    follow: bool,
    output: Option<&str>,
) -> Result<Exit> {
    let json = match output {
        None => false,
        Some("json") => true,
        Some(o) => {
            return Err(CliError::usage(format!(
                "-o {o}: transcript prints `json` (the entries as they are) or, without -o, a conversation"
            )))
        }
    };
    let r = Read {
        run,
        file: "transcript",
        command: "transcript",
        attempt,
        start: Vec::new(),
        follow,
    };
    if json {
        return read(ctx, r, &mut |b| term::out_bytes(b));
    }
    let mut partial: Vec<u8> = Vec::new();
    let exit = read(ctx, r, &mut |b| {
        partial.extend_from_slice(b);
        while let Some(n) = partial.iter().position(|c| *c == b'\n') {
            let line: Vec<u8> = partial.drain(..=n).collect();
            term::out(&block(&line[..n]));
        }
    })?;
    if !partial.is_empty() {
        term::out(&block(&partial));
    }
    Ok(exit)
}

/// One line of the transcript, for people (ending with a blank line).
fn block(line: &[u8]) -> String {
    if line.iter().all(u8::is_ascii_whitespace) {
        return String::new();
    }
    match serde_json::from_slice::<Entry>(line) {
        Ok(e) => format!("{}\n", render(&e)),
        Err(_) => format!("{}\n\n", String::from_utf8_lossy(line)),
    }
}

/// An entry as a block of text: a heading line, then its text indented.
pub(crate) fn render(e: &Entry) -> String {
    let when =
        e.at.as_deref()
            .and_then(|t| t.get(11..19))
            .map(|t| format!("{t} "))
            .unwrap_or_default();
    let text = e.text.as_deref().unwrap_or("");
    let (head, body) = match e.kind {
        EntryKind::Session => (
            format!(
                "session {}{}",
                e.session_id.as_deref().unwrap_or("?"),
                e.model
                    .as_deref()
                    .map(|m| format!(" (model {m})"))
                    .unwrap_or_default()
            ),
            String::new(),
        ),
        EntryKind::Message => (
            e.role.clone().unwrap_or_else(|| "message".into()),
            text.into(),
        ),
        EntryKind::ToolCall => (
            format!(
                "tool call {}{}",
                e.tool.as_deref().unwrap_or("?"),
                e.target
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default()
            ),
            text.into(),
        ),
        EntryKind::ToolResult => (
            format!(
                "tool result{} {}",
                e.tool
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default(),
                ok_word(e.ok)
            ),
            excerpt(text),
        ),
        EntryKind::Error => ("error".into(), text.into()),
        EntryKind::Retry => ("retry".into(), text.into()),
        EntryKind::Denied => (
            format!(
                "denied {}{}",
                e.tool.as_deref().unwrap_or("?"),
                e.target
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default()
            ),
            text.into(),
        ),
        EntryKind::Usage => {
            let u = e.usage.as_ref();
            let n = |f: fn(&pam_manifests::protocol::TokenUsage) -> u64| u.map_or(0, f);
            (
                format!(
                    "usage: {} in ({} cached), {} out{}",
                    n(|u| u.input_tokens),
                    n(|u| u.cached_input_tokens),
                    n(|u| u.output_tokens),
                    e.model
                        .as_deref()
                        .or(u.and_then(|u| u.model.as_deref()))
                        .map(|m| format!(", {m}"))
                        .unwrap_or_default()
                ),
                String::new(),
            )
        }
        EntryKind::Result => (format!("result {}", ok_word(e.ok)), text.into()),
    };
    let mut out = format!("{when}{head}\n");
    for l in body.lines() {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn ok_word(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "ok",
        Some(false) => "failed",
        None => "",
    }
}

/// At most [`EXCERPT`] characters, marked `…` when cut.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_as_a_conversation() {
        let line = |j: &str| block(j.as_bytes());
        assert_eq!(
            line(
                r#"{"kind":"message","role":"assistant","text":"Hello\nthere","at":"2026-03-01T12:00:05.123Z"}"#
            ),
            "12:00:05 assistant\n  Hello\n  there\n\n"
        );
        assert_eq!(
            line(r#"{"kind":"tool_call","tool":"Write","target":"a.txt","text":"3 lines"}"#),
            "tool call Write a.txt\n  3 lines\n\n"
        );
        assert_eq!(
            line(r#"{"kind":"tool_result","ok":false,"text":"boom"}"#),
            "tool result failed\n  boom\n\n"
        );
        assert_eq!(
            line(
                r#"{"kind":"usage","usage":{"input_tokens":10,"cached_input_tokens":2,"output_tokens":5},"model":"m1"}"#
            ),
            "usage: 10 in (2 cached), 5 out, m1\n\n"
        );
        assert_eq!(
            line(r#"{"kind":"retry","text":"attempt 2 of 10"}"#),
            "retry\n  attempt 2 of 10\n\n"
        );
        // Not an entry: as it is.
        assert_eq!(line("not json"), "not json\n\n");
        let long = "x".repeat(EXCERPT + 5);
        assert!(excerpt(&long).ends_with('…'));
        assert_eq!(excerpt(&long).chars().count(), EXCERPT + 1);
    }
}
