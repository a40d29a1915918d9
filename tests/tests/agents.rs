//! The real agent CLIs end to end: real pamd, a real pam-worker, real
//! tmux and git, and Claude Code, Codex and Gemini CLI (pinned in
//! tests/agents, installed by ./scripts/test) against a scripted model
//! server. For each CLI: a workspace run whose agent writes a file and
//! runs a command ends with both in its commit; a readOnly run whose agent
//! tries to write shows PermissionDenied and is no plain success; a 500
//! from the model fails the run with the CLI's words for it; a run stopped
//! after one model call shows that call's usage exactly once; the session
//! id is recorded, what the agent did shows in `describe` and `pamctl
//! transcript`, and a pamd crash mid-run loses none of its log or
//! transcript.

use std::time::Duration;

use pam_model_server::{Script, Turn, Usage};
use pam_tests::agents::AgentWorld;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// A command an `edits` run may run (each CLI's build and test rules)
/// that leaves a file behind, so the commit shows it ran.
const COMMAND: &str = r#"python3 -c "open('ran.txt','w').write('ran\n')""#;

/// The scripted usage of `turns`, plus every side request the CLI made
/// (Gemini's model router): what the run must show, each call once.
fn expected(w: &AgentWorld, turns: &[Usage]) -> (u64, u64, u64) {
    let side: Vec<Usage> = w.server.side_calls().iter().map(|c| c.usage).collect();
    let all = turns.iter().chain(side.iter());
    all.fold((0, 0, 0), |(i, c, o), u| {
        (
            i + u.input_tokens + u.cached_input_tokens,
            c + u.cached_input_tokens,
            o + u.output_tokens,
        )
    })
}

fn usage_of(run: &Value) -> (u64, u64, u64) {
    let t = &run["status"]["usage"]["total"];
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    (n("inputTokens"), n("cachedInputTokens"), n("outputTokens"))
}

fn condition<'a>(run: &'a Value, kind: &str) -> Option<&'a Value> {
    run["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

async fn writes_a_file_and_runs_a_command_into_its_commit(cli: &'static str) {
    let usage = [
        Usage::new(1200, 0, 40),
        Usage::new(1300, 1200, 20),
        Usage::new(60, 1300, 8),
    ];
    let script = Script::new([
        Turn::write_file("hello.txt", "hello from pam\n").with_usage(1200, 0, 40),
        Turn::run_command(COMMAND).with_usage(1300, 1200, 20),
        Turn::text("Wrote hello.txt and ran the script.").with_usage(60, 1300, 8),
    ]);
    let Some(w) = AgentWorld::start(cli, script).await else {
        return;
    };
    w.run("work", "Create hello.txt, then run the script.", "");
    let r = w.wait_phase("work", "exited").await;
    assert_eq!(r["status"]["exitCode"], 0, "{r}");
    assert!(condition(&r, "PermissionDenied").is_none(), "{r}");
    assert_eq!(w.server.remaining_turns(), 0, "every turn was asked for");
    // Both the file it wrote and the file its command made, in its commit.
    let res = &r["status"]["result"];
    assert_eq!(
        (res["commits"].as_u64(), res["filesChanged"].as_u64()),
        (Some(1), Some(2)),
        "{r}"
    );
    let full = w
        .pamd
        .get("/api/v1/projects/e2e/runs/work/result")
        .await
        .unwrap();
    let patch = full["patch"].as_str().unwrap_or("");
    assert!(
        patch.contains("+hello from pam") && patch.contains("+ran"),
        "{patch}"
    );
    // The session, the permissions it ran with, its usage each call once.
    let session = r["status"]["sessionId"].as_str().unwrap_or("");
    assert!(!session.is_empty(), "{r}");
    assert_eq!(r["status"]["permissions"]["mode"], "edits", "{r}");
    assert_eq!(r["status"]["permissions"]["from"], "default", "{r}");
    assert_eq!(usage_of(&r), expected(&w, &usage), "{r}");
    // The whole exchange, from the worker's transcript.
    let transcript = w.pamctl(&["transcript", "work"]);
    for said in [
        "Create hello.txt, then run the script.",
        "hello.txt",
        "ran.txt",
        "Wrote hello.txt and ran the script.",
    ] {
        assert!(transcript.contains(said), "{said:?} in:\n{transcript}");
    }
    assert!(transcript.contains("tool call"), "{transcript}");
    // What it did, in describe.
    let described = w.pamctl(&["describe", "run", "work"]);
    assert!(
        described.contains(&format!("Session:          {session}")),
        "{described}"
    );
    let recent = described.split("Recent Activity:").nth(1).unwrap_or("");
    assert!(recent.contains("hello.txt"), "{described}");
    assert!(recent.contains("ran.txt"), "{described}");
}

async fn read_only_refuses_the_write_visibly(cli: &'static str) {
    let script = Script::new([
        Turn::write_file("hello.txt", "hello from pam\n").with_usage(1200, 0, 40),
        Turn::text("I could not write it.").with_usage(60, 1200, 8),
    ]);
    let Some(w) = AgentWorld::start(cli, script).await else {
        return;
    };
    w.run(
        "look",
        "Create hello.txt.",
        "  permissions:\n    mode: readOnly\n",
    );
    let r = w.wait_phase("look", "exited").await;
    let denied =
        condition(&r, "PermissionDenied").unwrap_or_else(|| panic!("no PermissionDenied: {r}"));
    assert_eq!(denied["status"], "True", "{r}");
    let message = denied["message"].as_str().unwrap_or("");
    assert!(message.contains("refused 1 tool call"), "{message}");
    assert_eq!(r["status"]["result"]["commits"], 0, "nothing written: {r}");
    // Never a plain success: not in `get runs`, not in the journal.
    let table = w.pamctl(&["get", "runs", "look"]);
    assert!(table.contains("PermissionDenied"), "{table}");
    let events = pam_tests::worker::events(&w.pamd, Some("run.")).await;
    let finished = events
        .iter()
        .find(|e| e["topic"] == "run.finished")
        .expect("run.finished");
    assert_eq!(finished["reason"], "PermissionDenied", "{finished}");
    assert!(
        events.iter().any(|e| e["topic"] == "run.permission_denied"),
        "{events:#?}"
    );
}

async fn a_model_error_fails_with_the_clis_words(cli: &'static str, words: &str) {
    let script = Script::new([Turn::error(500).times(20)]);
    let Some(w) = AgentWorld::start(cli, script).await else {
        return;
    };
    w.run("broken", "Say hi.", "");
    let r = w.wait_phase("broken", "failed").await;
    let message = r["status"]["message"].as_str().unwrap_or("");
    assert!(message.contains(words), "{message:?} in {r}");
    let table = w.pamctl(&["get", "runs", "broken", "-o", "wide"]);
    assert!(table.contains(words), "{table}");
    // The retries were visible while they went on.
    let kinds: Vec<Value> = w
        .activity("broken")
        .await
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert!(kinds.contains(&Value::from("retry")), "{kinds:?}");
    assert!(kinds.contains(&Value::from("error")), "{kinds:?}");
}

async fn a_stop_after_one_call_counts_that_call_once(cli: &'static str) {
    let first = Usage::new(1200, 0, 40);
    let script = Script::new([
        Turn::write_file("hello.txt", "hello from pam\n").with_usage(1200, 0, 40),
        Turn::text("never sent").with_usage(1, 1, 1).held(),
    ]);
    let Some(w) = AgentWorld::start(cli, script).await else {
        return;
    };
    w.run("halt", "Create hello.txt.", "");
    w.server.wait_for_held(1, WAIT).await.unwrap();
    // The first call's usage reaches pamd while the agent waits on its
    // second (each CLI's live source: claude's stream, the session files;
    // Gemini's model router is in neither, only in its final result).
    let want = (
        first.prompt_total(),
        first.cached_input_tokens,
        first.output_tokens,
    );
    pam_tests::eventually(WAIT, "the first call's usage", || async {
        let r = w.get("halt").await;
        (usage_of(&r) == want).then_some(())
    })
    .await;
    w.pamctl(&["stop", "halt"]);
    let r = w.wait_phase("halt", "stopped").await;
    assert_eq!(usage_of(&r), want, "exactly once after the stop: {r}");
    assert!(
        !r["status"]["sessionId"].as_str().unwrap_or("").is_empty(),
        "{r}"
    );
    w.server.release_held();
}

/// pamd SIGKILLed while the agent works and started again after it
/// finished: the log and the transcript are whole, with what the agent
/// printed while pamd was down.
async fn a_pamd_crash_mid_run_loses_no_log_or_transcript(cli: &'static str) {
    let script = Script::new([
        Turn::write_file("hello.txt", "hello from pam\n").with_usage(1200, 0, 40),
        Turn::text("Finished while pamd was down.")
            .with_usage(60, 1200, 8)
            .held(),
    ]);
    let Some(mut w) = AgentWorld::start(cli, script).await else {
        return;
    };
    w.run("crash", "Create hello.txt.", "");
    w.server.wait_for_held(1, WAIT).await.unwrap();
    let r = w.get("crash").await;
    let uid = r["metadata"]["uid"].as_str().unwrap().to_string();
    w.pamd.kill9();
    w.server.release_held();
    // The agent finishes while pamd is down: its log says so on the worker.
    let log_file = w.worker.data_dir.join("runs").join(&uid).join("1.log");
    pam_tests::eventually(WAIT, "the agent's last words in its log", || async {
        let text = std::fs::read_to_string(&log_file).unwrap_or_default();
        text.contains("Finished while pamd was down.").then_some(())
    })
    .await;
    w.pamd.start_again().await.unwrap();
    w.wait_phase("crash", "exited").await;
    let printed = w.pamd.pamctl(&["-p", "e2e", "logs", "crash"]);
    assert!(printed.status.success(), "{printed:?}");
    let on_worker = std::fs::read(&log_file).unwrap();
    assert_eq!(printed.stdout, on_worker, "the whole log, byte for byte");
    let transcript = w.pamctl(&["transcript", "crash"]);
    assert!(
        transcript.contains("Finished while pamd was down."),
        "{transcript}"
    );
    assert!(transcript.contains("hello.txt"), "{transcript}");
}

macro_rules! per_cli {
    ($($cli:ident: $error:literal),+ $(,)?) => {
        $(
            mod $cli {

                #[tokio::test]
                async fn writes_a_file_and_runs_a_command_into_its_commit() {
                    super::writes_a_file_and_runs_a_command_into_its_commit(stringify!($cli)).await;
                }

                #[tokio::test]
                async fn read_only_refuses_the_write_visibly() {
                    super::read_only_refuses_the_write_visibly(stringify!($cli)).await;
                }

                #[tokio::test]
                async fn a_model_error_fails_with_the_clis_words() {
                    super::a_model_error_fails_with_the_clis_words(stringify!($cli), $error).await;
                }

                #[tokio::test]
                async fn a_pamd_crash_mid_run_loses_no_log_or_transcript() {
                    super::a_pamd_crash_mid_run_loses_no_log_or_transcript(stringify!($cli)).await;
                }

                #[tokio::test]
                async fn a_stop_after_one_call_counts_that_call_once() {
                    super::a_stop_after_one_call_counts_that_call_once(stringify!($cli)).await;
                }
            }
        )+
    };
}

// What each CLI says of a 500: Claude and Gemini pass the API's message
// on; Codex replaces a 5xx body with its own sentence.
per_cli! {
    claude: "API Error: 500 Scripted error (500)",
    codex: "experiencing high demand",
    gemini: "API Error 500: Scripted error (500)",
}
