//! The real agent CLIs (tests/agents/node_modules) against the server, one
//! full agent loop each. A CLI that is not installed is skipped with a
//! note, so `cargo test` still passes before `npm ci`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use pam_model_server::{ModelServer, Script, Served, Turn};
use serde_json::Value;
use tokio::process::Command;

fn cli(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/agents/node_modules/.bin")
        .join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "skipped: {} not installed (npm ci in tests/agents)",
            path.display()
        );
        None
    }
}

/// A fresh HOME and git working directory under the system temp dir.
struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    fn new() -> Self {
        let root = std::env::temp_dir().join(format!("pam-model-server-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("repo")).unwrap();
        let status = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(root.join("repo"))
            .status()
            .expect("git runs");
        assert!(status.success());
        Self { root }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The CLI's stdout as JSON lines; panics with its stderr when it fails.
async fn run(mut command: Command) -> Vec<Value> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("CLI finishes within 2 minutes")
        .expect("CLI starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn base_command(program: &Path, sandbox: &Sandbox) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sandbox.home())
        .env("LANG", "C.UTF-8")
        .current_dir(sandbox.repo());
    command
}

fn write_then_text() -> Script {
    Script::new([
        Turn::write_file("hello.txt", "hello from pam\n").with_usage(1200, 0, 40),
        Turn::text("Finished.").with_usage(60, 1200, 8),
    ])
}

fn assert_wrote_file(sandbox: &Sandbox, server: &ModelServer) {
    let written = std::fs::read_to_string(sandbox.repo().join("hello.txt")).unwrap();
    assert_eq!(written, "hello from pam\n");
    assert_eq!(server.remaining_turns(), 0);
    let turns: Vec<Served> = server
        .turn_requests()
        .into_iter()
        .map(|r| r.served)
        .collect();
    assert_eq!(
        turns,
        [Served::Turn { index: 0 }, Served::Turn { index: 1 }]
    );
}

#[tokio::test]
async fn claude_accept_edits_writes_and_reports_scripted_usage() {
    let Some(claude) = cli("claude") else { return };
    let server = ModelServer::start(write_then_text()).await.unwrap();
    let sandbox = Sandbox::new();
    let mut command = base_command(&claude, &sandbox);
    command
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-pam-model-server")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args([
            "-p",
            "Create hello.txt",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args([
            "--permission-mode",
            "acceptEdits",
            "--model",
            "claude-sonnet-4-5",
        ]);
    let lines = run(command).await;

    assert_wrote_file(&sandbox, &server);
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["result"], "Finished.");
    assert_eq!(result["usage"]["input_tokens"], 1260);
    assert_eq!(result["usage"]["cache_read_input_tokens"], 1200);
    assert_eq!(result["usage"]["output_tokens"], 48);
    assert_eq!(
        result["modelUsage"]["claude-sonnet-4-5"]["inputTokens"],
        1260
    );
}

/// The use the hold is for: a run stopped after exactly one model call,
/// while the CLI waits for its second.
#[tokio::test]
async fn claude_killed_while_its_second_call_is_held() {
    let Some(claude) = cli("claude") else { return };
    let script = Script::new([
        Turn::write_file("hello.txt", "hello from pam\n"),
        Turn::text("Finished.").held(),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let sandbox = Sandbox::new();
    let mut command = base_command(&claude, &sandbox);
    command
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-pam-model-server")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args(["-p", "Create hello.txt", "--output-format", "stream-json"])
        .args(["--verbose", "--permission-mode", "acceptEdits"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let wait = Duration::from_secs(60);
    server.wait_for_turn_requests(2, wait).await.unwrap();
    assert!(sandbox.repo().join("hello.txt").exists(), "first call done");
    assert_eq!(server.held_requests(), 1);
    assert!(child.try_wait().unwrap().is_none(), "the CLI waits");
    child.kill().await.unwrap();
    server.wait_for_held(0, wait).await.unwrap();
    assert_eq!(server.turn_requests().len(), 2);
}

#[tokio::test]
async fn codex_workspace_write_applies_the_patch() {
    let Some(codex) = cli("codex") else { return };
    let server = ModelServer::start(write_then_text()).await.unwrap();
    let sandbox = Sandbox::new();
    let config = format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"pam\"\ncheck_for_update_on_startup = false\n\
         [analytics]\nenabled = false\n[features]\nplugins = false\n[model_providers.pam]\n\
         name = \"pam model server\"\nbase_url = \"{}/v1\"\nenv_key = \"PAM_MODEL_API_KEY\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
        server.base_url()
    );
    std::fs::create_dir_all(sandbox.home().join(".codex")).unwrap();
    std::fs::write(sandbox.home().join(".codex/config.toml"), config).unwrap();
    let mut command = base_command(&codex, &sandbox);
    command
        .env("PAM_MODEL_API_KEY", "sk-pam-model-server")
        .args([
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "Create hello.txt",
        ]);
    let lines = run(command).await;

    assert_wrote_file(&sandbox, &server);
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "turn.completed");
    // OpenAI counts cached tokens inside input_tokens.
    assert_eq!(done["usage"]["input_tokens"], 2460);
    assert_eq!(done["usage"]["cached_input_tokens"], 1200);
    assert_eq!(done["usage"]["output_tokens"], 48);
}

#[tokio::test]
async fn gemini_auto_edit_writes_and_counts_the_router_separately() {
    let Some(gemini) = cli("gemini") else { return };
    let server = ModelServer::start(write_then_text()).await.unwrap();
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.home().join(".gemini")).unwrap();
    std::fs::write(
        sandbox.home().join(".gemini/settings.json"),
        r#"{"security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}}"#,
    )
    .unwrap();
    let mut command = base_command(&gemini, &sandbox);
    command
        .env("GEMINI_API_KEY", "sk-pam-model-server")
        .env("GOOGLE_GEMINI_BASE_URL", server.base_url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args([
            "--output-format",
            "stream-json",
            "--approval-mode",
            "auto_edit",
        ])
        .args(["-p", "Create hello.txt"]);
    let lines = run(command).await;

    assert_wrote_file(&sandbox, &server);
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["status"], "success");
    let side = server.side_calls();
    assert_eq!(side.len(), 1, "the model router's classifier call");
    let router = &result["stats"]["models"][&side[0].model];
    assert_eq!(router["input_tokens"], side[0].usage.input_tokens);
    let main_model = server.turn_requests()[0].model.clone().unwrap();
    let main = &result["stats"]["models"][&main_model];
    assert_eq!(main["input_tokens"], 2460);
    assert_eq!(main["cached"], 1200);
    assert_eq!(main["output_tokens"], 48);
}
