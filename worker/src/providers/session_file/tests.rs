//! Session files as the real CLIs wrote them (`captures/*/session-*`),
//! laid out where each CLI keeps them.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::*;
use crate::providers::meter::UsageMeter;
use crate::testdir::TestDir;

fn at(t: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(t).unwrap().to_utc()
}

fn env(home: &Path) -> BTreeMap<String, String> {
    BTreeMap::from([("HOME".into(), home.display().to_string())])
}

fn totals(reports: Vec<UsageReport>, meter: &mut UsageMeter) -> (u64, u64, u64) {
    for r in reports {
        meter.report(r);
    }
    let u = meter.so_far().unwrap_or_default();
    (u.input_tokens, u.cached_input_tokens, u.output_tokens)
}

const CODEX_THREAD: &str = "01a25262-1a29-7fe0-a73f-8f24ed986df6";

#[test]
fn codex_responses_are_read_as_they_are_written_each_once() {
    let d = TestDir::new("codex-session");
    let dir = d.path().join(".codex/sessions/2026/12/07");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("rollout-2026-12-07T21-21-30-{CODEX_THREAD}.jsonl"));
    let during = include_str!("../captures/codex/session-two-step.rollout-during.jsonl");
    let whole = include_str!("../captures/codex/session-two-step.rollout.jsonl");
    let mut f = SessionFile::new(
        ProviderKind::Codex,
        &env(d.path()),
        CODEX_THREAD,
        at("2026-12-07T21:21:30Z"),
    )
    .unwrap();
    let mut meter = UsageMeter::default();
    assert!(f.poll().is_empty(), "no file yet");
    // Mid-run: the first response, while the CLI waits on its second.
    std::fs::write(&file, during).unwrap();
    assert_eq!(totals(f.poll(), &mut meter), (1800, 300, 45));
    let u = meter.so_far().unwrap();
    assert_eq!(u.model.as_deref(), Some("gpt-5.5"));
    // The rest, appended; a line cut in two is read once it is whole.
    let rest = &whole[during.len()..];
    let (a, _) = rest.split_at(rest.len() / 2);
    std::fs::write(&file, format!("{during}{a}")).unwrap();
    let first = f.poll();
    std::fs::write(&file, whole).unwrap();
    let second = f.poll();
    assert_eq!(
        totals(first.into_iter().chain(second).collect(), &mut meter),
        (3670, 2100, 54)
    );
    assert!(f.poll().is_empty());
}

#[test]
fn a_resumed_codex_thread_counts_only_this_attempts_responses() {
    let d = TestDir::new("codex-resume");
    let dir = d.path().join("codex-home/sessions/2026/12/07");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("rollout-2026-12-07T21-21-30-{CODEX_THREAD}.jsonl")),
        include_str!("../captures/codex/session-resume.rollout.jsonl"),
    )
    .unwrap();
    let env = BTreeMap::from([(
        "CODEX_HOME".into(),
        d.path().join("codex-home").display().to_string(),
    )]);
    // The resume began after the first run's two responses.
    let mut f = SessionFile::new(
        ProviderKind::Codex,
        &env,
        CODEX_THREAD,
        at("2026-12-07T21:21:31.5Z"),
    )
    .unwrap();
    assert_eq!(
        totals(f.poll(), &mut UsageMeter::default()),
        (1940, 1900, 7)
    );
}

#[test]
fn gemini_responses_are_read_once_each_though_rewritten() {
    let d = TestDir::new("gemini-session");
    let dir = d.path().join(".gemini/tmp/repo/chats");
    std::fs::create_dir_all(&dir).unwrap();
    let id = "5374015f-8f6e-41e4-a524-a1cc5e4dc496";
    let file = dir.join("session-2026-12-07T21-23-5374015f.jsonl");
    let during = include_str!("../captures/gemini/session-two-step.chat-during.jsonl");
    let whole = include_str!("../captures/gemini/session-two-step.chat.jsonl");
    let mut f = SessionFile::new(
        ProviderKind::Gemini,
        &env(d.path()),
        id,
        at("2026-12-07T21:23:00Z"),
    )
    .unwrap();
    let mut meter = UsageMeter::default();
    std::fs::write(&file, during).unwrap();
    assert_eq!(totals(f.poll(), &mut meter), (1800, 300, 45));
    std::fs::write(&file, whole).unwrap();
    assert_eq!(totals(f.poll(), &mut meter), (3670, 2100, 54));
    assert_eq!(
        meter.so_far().unwrap().model.as_deref(),
        Some("gemini-3.8-flash")
    );
    // Another session sharing the first 8 characters is not this one.
    let other = SessionFile::new(
        ProviderKind::Gemini,
        &env(d.path()),
        "5374015f-0000-0000-0000-000000000000",
        at("2026-12-07T21:23:00Z"),
    );
    assert!(other.unwrap().poll().is_empty());
}

#[test]
fn ids_that_are_not_plain_names_and_other_providers_have_none() {
    let e = BTreeMap::from([("HOME".to_string(), "/h".to_string())]);
    assert!(SessionFile::new(ProviderKind::Codex, &e, "../../etc", Utc::now()).is_none());
    assert!(SessionFile::new(ProviderKind::Claude, &e, "abc", Utc::now()).is_none());
}
