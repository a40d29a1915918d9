//! The real agent CLIs (Claude Code, Codex, Gemini; pinned in
//! `tests/agents/package.json`, installed by `./scripts/test` with `npm
//! ci`) run by a real pam-worker against a scripted model server
//! ([`pam_model_server`]): the worker's `[providers.*]` tables point each
//! CLI at the server, offline, in a HOME of the test's own
//! (tests/agents/README.md says why each setting is there).
//!
//! A CLI that is not installed skips its test with a note, unless
//! `PAM_REQUIRE_AGENTS=1` (CI), where that is a failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pam_model_server::{ModelServer, Script};
use serde_json::Value;

use crate::git::workspaces::origin;
use crate::worker::{create_worker_token, fast_pamd, wait_online, Worker, FAST_WORKER_TOML};
use crate::Pamd;

/// The agent CLIs the suite runs.
pub const CLIS: [&str; 3] = ["claude", "codex", "gemini"];

/// The installed CLI `name`; `None` (the test returns) when tests/agents
/// is not installed, unless CI requires it.
pub fn cli(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("agents/node_modules/.bin")
        .join(name);
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is not installed: cd tests/agents && npm ci --no-audit --no-fund",
        path.display()
    );
    assert!(
        std::env::var("PAM_REQUIRE_AGENTS").as_deref() != Ok("1"),
        "{why}"
    );
    eprintln!("skipped: {why}");
    None
}

/// The worker.toml `[providers.<cli>]` table running the real `cli`
/// against `server`, its state in `home` (config files written there).
pub fn provider_table(cli_name: &str, program: &Path, server: &ModelServer, home: &Path) -> String {
    let base = server.base_url();
    let home_s = home.display().to_string();
    let env: Vec<(&str, String)> = match cli_name {
        "claude" => vec![
            ("HOME", home_s),
            ("ANTHROPIC_BASE_URL", base),
            ("ANTHROPIC_API_KEY", "sk-pam-test".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("CLAUDE_CODE_MAX_RETRIES", "1".into()),
        ],
        "codex" => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home).unwrap();
            std::fs::write(
                codex_home.join("config.toml"),
                format!(
                    "model = \"gpt-5.5\"\nmodel_provider = \"pam\"\ncheck_for_update_on_startup = false\n\
                     [analytics]\nenabled = false\n[features]\nplugins = false\n\
                     [model_providers.pam]\nname = \"pam model server\"\nbase_url = \"{base}/v1\"\n\
                     env_key = \"PAM_MODEL_API_KEY\"\nwire_api = \"responses\"\n\
                     request_max_retries = 1\nstream_max_retries = 1\n"
                ),
            )
            .unwrap();
            vec![
                ("HOME", home_s),
                ("CODEX_HOME", codex_home.display().to_string()),
                ("PAM_MODEL_API_KEY", "sk-pam-test".into()),
            ]
        }
        "gemini" => {
            let dir = home.join(".gemini");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("settings.json"),
                r#"{"security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false,
                                "maxAttempts": 2}}"#,
            )
            .unwrap();
            vec![
                ("HOME", home_s),
                ("GEMINI_API_KEY", "sk-pam-test".into()),
                ("GOOGLE_GEMINI_BASE_URL", base),
            ]
        }
        other => panic!("no agent CLI {other}"),
    };
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k} = {}", toml_str(v)))
        .collect();
    format!(
        "[providers.{cli_name}]\nprogram = {}\nenv = {{ {} }}\n",
        toml_str(&program.display().to_string()),
        env.join(", ")
    )
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

/// A pamd, a worker `h1` running the real `cli` against a model server
/// answering `script`, and a project `e2e` with a git repository and a
/// task `t1`.
pub struct AgentWorld {
    pub cli: &'static str,
    pub pamd: Pamd,
    pub worker: Worker,
    pub server: ModelServer,
    pub home: tempfile::TempDir,
    /// The project's bare repository.
    pub origin: PathBuf,
    _repo: tempfile::TempDir,
}

impl AgentWorld {
    /// `None` when the CLI is not installed (see [`cli`]).
    pub async fn start(cli_name: &'static str, script: Script) -> Option<AgentWorld> {
        let program = cli(cli_name)?;
        let server = ModelServer::start(script).await.unwrap();
        let home = tempfile::Builder::new()
            .prefix("pam-agent-home")
            .tempdir()
            .unwrap();
        let pamd = fast_pamd().await;
        let token = create_worker_token(&pamd, "h1").await.unwrap();
        let toml = format!(
            "{FAST_WORKER_TOML}\n{}",
            provider_table(cli_name, &program, &server, home.path())
        );
        let worker = Worker::start_with_token(&pamd.url, &token, "h1", &toml).unwrap();
        wait_online(&pamd, "h1").await;
        let repo = tempfile::tempdir().unwrap();
        let origin = origin(repo.path());
        let project = crate::git::workspaces::project(&format!("file://{}", origin.display()));
        crate::worker::apply(&pamd, &project);
        Some(AgentWorld {
            cli: cli_name,
            pamd,
            worker,
            server,
            home,
            origin,
            _repo: repo,
        })
    }

    /// Applies run `name` of task t1 with provider [`Self::cli`], in a
    /// workspace, `extra` spec lines (two-space indented) added.
    pub fn run(&self, name: &str, prompt: &str, extra: &str) {
        let yaml = format!(
            "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: {}\n  prompt: {}\n  workspace: {{}}\n{extra}",
            self.cli,
            toml_str(prompt)
        );
        crate::worker::apply(&self.pamd, &yaml);
    }

    /// pamctl in project e2e, asserting success: its stdout.
    pub fn pamctl(&self, args: &[&str]) -> String {
        let mut all = vec!["-p", "e2e"];
        all.extend_from_slice(args);
        crate::ok(&self.pamd.pamctl(&all))
    }

    /// The run object.
    pub async fn get(&self, name: &str) -> Value {
        crate::worker::run(&self.pamd, name).await
    }

    /// Waits until run `name` is in phase `want`; on a timeout, fails
    /// with the run and what its attempts left on the worker (logs,
    /// transcripts) to say why.
    pub async fn wait_phase(&self, name: &str, want: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let r = self.get(name).await;
            if r["status"]["phase"] == want {
                return r;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "run {name} not {want} after 90 s: {r:#}\n{}",
                    self.worker_files(r["metadata"]["uid"].as_str().unwrap_or(""))
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The files the worker keeps for run `uid` (its logs and
    /// transcripts), for a failure's message.
    pub fn worker_files(&self, uid: &str) -> String {
        let dir = self.worker.data_dir.join("runs").join(uid);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return format!("(no {})", dir.display());
        };
        let mut out = String::new();
        for e in rd.flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let tail: String = text
                .chars()
                .rev()
                .take(4000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            out.push_str(&format!("--- {}\n{tail}\n", e.path().display()));
        }
        out
    }

    /// The run's newest activity items (`GET …/activity`).
    pub async fn activity(&self, name: &str) -> Vec<Value> {
        self.pamd
            .get(&format!("/api/v1/projects/e2e/runs/{name}/activity"))
            .await
            .unwrap_or(Value::Null)["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}
