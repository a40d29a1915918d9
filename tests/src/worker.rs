//! Real `pam-worker` processes for end-to-end tests. Each worker gets a
//! temporary data dir and a private tmux server (`tmux -S <tmp>/tmux.sock`,
//! through worker.toml's `tmux_socket`), so tests never collide with each
//! other or with a user's tmux; the server is killed when the [`Worker`] is
//! dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use crate::{bin, eventually, Pamd};

/// worker.toml for tests: 1 s heartbeat and tick, 2 s stop grace, fast
/// snapshots. `{socket}` is filled in.
pub const FAST_WORKER_TOML: &str =
    "heartbeat_seconds = 1\ntick_seconds = 1\nstop_grace_seconds = 2\nsnapshot_interval_ms = 200\n";

/// pamd thresholds for tests: 1 s heartbeats, offline after 4 s.
pub const FAST_PAMD_TOML: &str = "[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 4\n";

/// A running pam-worker. SIGKILLed, and its tmux server killed, on drop.
pub struct Worker {
    pub name: String,
    pub server: String,
    pub data_dir: PathBuf,
    pub socket: PathBuf,
    pub token_file: PathBuf,
    pub config: PathBuf,
    /// `PAM_LOG` of the worker (`info` unless started with another).
    log_filter: String,
    /// Environment over the test's ([`Worker::start_with_env`]).
    env: Vec<(String, String)>,
    child: Option<Child>,
    tmp: tempfile::TempDir,
}

/// Creates a worker token for `host` through the API.
pub async fn create_worker_token(pamd: &Pamd, host: &str) -> anyhow::Result<String> {
    let r = pamd
        .http()
        .post(format!("{}/api/v1/tokens", pamd.url))
        .bearer_auth(&pamd.token)
        .json(&json!({ "worker": host }))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "create token: {}", r.status());
    let v: Value = r.json().await?;
    v["token"]
        .as_str()
        .map(str::to_string)
        .context("token in answer")
}

impl Worker {
    /// Creates a token for `name` and starts a worker with it.
    pub async fn start(pamd: &Pamd, name: &str) -> anyhow::Result<Worker> {
        let token = create_worker_token(pamd, name).await?;
        let toml = match &pamd.ca_file {
            Some(ca) => format!(
                "{FAST_WORKER_TOML}\nca_file = {:?}\n",
                ca.display().to_string()
            ),
            None => FAST_WORKER_TOML.to_string(),
        };
        Worker::start_with_token(&pamd.url, &token, name, &toml)
    }

    /// Creates a token for `name` and starts a worker on `other`'s tmux
    /// server: two agents sharing one socket, as two workers left on the
    /// default `pam` socket on one machine do.
    pub async fn start_sharing_socket(
        pamd: &Pamd,
        name: &str,
        other: &Worker,
    ) -> anyhow::Result<Worker> {
        let token = create_worker_token(pamd, name).await?;
        Worker::start_on(
            &pamd.url,
            &token,
            name,
            FAST_WORKER_TOML,
            Some(&other.socket),
        )
    }

    /// Starts a worker with `token` and extra worker.toml text.
    pub fn start_with_token(
        server: &str,
        token: &str,
        name: &str,
        worker_toml: &str,
    ) -> anyhow::Result<Worker> {
        Worker::start_on(server, token, name, worker_toml, None)
    }

    /// [`Worker::start_with_token`] logging at `log_filter` (`PAM_LOG`,
    /// e.g. `trace`).
    pub fn start_logging(
        server: &str,
        token: &str,
        name: &str,
        worker_toml: &str,
        log_filter: &str,
    ) -> anyhow::Result<Worker> {
        let mut w = Worker::prepare(server, token, name, worker_toml, None)?;
        w.log_filter = log_filter.to_string();
        w.spawn()?;
        Ok(w)
    }

    /// Starts a worker whose process (and so its tmux server and the
    /// sessions' wrappers) has `env` over the test's environment — e.g. a
    /// `PATH` with a stand-in `git` that fails on cue.
    pub fn start_with_env(
        server: &str,
        token: &str,
        name: &str,
        worker_toml: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Worker> {
        let mut w = Worker::prepare(server, token, name, worker_toml, None)?;
        w.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        w.spawn()?;
        Ok(w)
    }

    /// Starts a worker on `socket`, or on a private tmux server.
    fn start_on(
        server: &str,
        token: &str,
        name: &str,
        worker_toml: &str,
        socket: Option<&Path>,
    ) -> anyhow::Result<Worker> {
        let mut w = Worker::prepare(server, token, name, worker_toml, socket)?;
        w.spawn()?;
        Ok(w)
    }

    /// The worker's files, not started yet.
    fn prepare(
        server: &str,
        token: &str,
        name: &str,
        worker_toml: &str,
        socket: Option<&Path>,
    ) -> anyhow::Result<Worker> {
        let tmp = tempfile::Builder::new().prefix("pamw").tempdir()?;
        let data_dir = tmp.path().join("data");
        std::fs::create_dir_all(&data_dir)?;
        let socket = socket.map_or_else(|| tmp.path().join("tmux.sock"), Path::to_path_buf);
        let token_file = tmp.path().join("token");
        std::fs::write(&token_file, token)?;
        let config = tmp.path().join("worker.toml");
        std::fs::write(
            &config,
            format!(
                "tmux_socket = {:?}\n{worker_toml}",
                socket.display().to_string()
            ),
        )?;
        Ok(Worker {
            name: name.to_string(),
            server: server.to_string(),
            data_dir,
            socket,
            token_file,
            config,
            log_filter: "info".into(),
            env: Vec::new(),
            child: None,
            tmp,
        })
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.path().join("worker.log"))?;
        let child = Command::new(bin("pam-worker"))
            .arg("--server")
            .arg(&self.server)
            .arg("--token-file")
            .arg(&self.token_file)
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--config")
            .arg(&self.config)
            .env("PAM_LOG", &self.log_filter)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("start pam-worker")?;
        self.child = Some(child);
        Ok(())
    }

    /// The worker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("worker.log")).unwrap_or_default()
    }

    /// The worker's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL (a crash); its tmux sessions live on.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the worker again on the same data dir, socket and token.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }

    /// Whether the process has exited (reaping it if so).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
    }

    /// Runs `tmux -S <socket> <args>`.
    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tmux")
    }

    /// The `pam-*` sessions on this worker's tmux server.
    pub fn sessions(&self) -> Vec<String> {
        let out = self.tmux(&["list-sessions", "-F", "#{session_name}"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("pam-"))
            .map(str::to_string)
            .collect()
    }

    /// The data dir's log of one attempt.
    pub fn run_log(&self, run_id: &str, attempt: u32) -> PathBuf {
        self.data_dir
            .join("runs")
            .join(run_id)
            .join(format!("{attempt}.log"))
    }

    /// How many signals wait in the worker's outbox (not yet acknowledged
    /// by pamd).
    pub fn outbox_len(&self) -> usize {
        std::fs::read_dir(self.data_dir.join("outbox"))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// The temp dir root (for scratch files such as a cwd).
    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill9();
        let _ = self.tmux(&["kill-server"]);
    }
}

// ------------------------------------------------------------ helpers

/// A project `e2e` and a task `t1`, as YAML.
pub fn project_yaml() -> String {
    "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: e2e\nspec:\n  displayName: E2E\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t1\n  project: e2e\nspec:\n  title: T1\n".to_string()
}

/// A Run manifest for the exec provider running `command` (JSON array).
pub fn run_yaml(name: &str, cwd: &Path, command: &[String], extra_spec: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: exec\n  cwd: {cwd:?}\n  command: {cmd}\n{extra_spec}",
        cwd = cwd.display().to_string(),
        cmd = serde_json::to_string(command).unwrap(),
    )
}

/// The fake provider's command line with `args`.
pub fn fake(args: &[&str]) -> Vec<String> {
    let mut v = vec![bin("pam-fake-provider").display().to_string()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// A worker config table making `claude` the command `argv`.
pub fn claude_command<S: AsRef<str>>(argv: &[S]) -> String {
    let argv: Vec<&str> = argv.iter().map(AsRef::as_ref).collect();
    format!(
        "[providers.claude]\ncommand = {}\n",
        serde_json::to_string(&argv).unwrap()
    )
}

/// A pamd with [`FAST_PAMD_TOML`] (1 s heartbeats, offline after 4 s).
pub async fn fast_pamd() -> Pamd {
    Pamd::start(crate::PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        ..crate::PamdOptions::default()
    })
    .await
    .unwrap()
}

/// A worker config table making `claude` the fake provider that prints
/// env var `key` (three lines, 300 ms apart): how the Secret tests see a
/// value reach a run.
pub fn claude_printing_env(key: &str) -> String {
    claude_command(&fake(&[
        "--print-env",
        key,
        "--lines",
        "3",
        "--sleep-ms",
        "300",
    ]))
}

/// `pamctl apply -f -` with `yaml`, asserting success.
pub fn apply(pamd: &Pamd, yaml: &str) {
    crate::ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(yaml)));
}

/// The run object (GET).
pub async fn run(pamd: &Pamd, name: &str) -> Value {
    pamd.get(&format!("/api/v1/projects/e2e/runs/{name}"))
        .await
        .unwrap_or(Value::Null)
}

/// The run's `status.phase`.
pub async fn phase(pamd: &Pamd, name: &str) -> String {
    run(pamd, name).await["status"]["phase"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Waits until the run's phase is `want`; returns the run object.
/// On a timeout it says where the run stood: its status, its events and
/// the end of pamd's log.
pub async fn wait_phase(pamd: &Pamd, name: &str, want: &str, timeout: Duration) -> Value {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let r = run(pamd, name).await;
        if r["status"]["phase"] == want {
            return r;
        }
        if std::time::Instant::now() >= deadline {
            let evs: Vec<String> = events(pamd, Some("run."))
                .await
                .iter()
                .map(|e| format!("{} {} {}", e["createdAt"], e["topic"], e["payload"]))
                .collect();
            let log = pamd.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            panic!(
                "timed out after {timeout:?} waiting for run {name} {want}\nrun: {r}\nevents:\n{}\npamd.log (last 60 lines, newest first):\n{}",
                evs.join("\n"),
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every journaled event (oldest first), optionally one topic or prefix.
pub async fn events(pamd: &Pamd, topic: Option<&str>) -> Vec<Value> {
    let path = match topic {
        Some(t) => format!("/api/v1/events?limit=10000&topic={t}"),
        None => "/api/v1/events?limit=10000".to_string(),
    };
    pamd.get(&path).await.unwrap_or(Value::Null)["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The `run.*` events of one run id, oldest first.
pub async fn run_events(pamd: &Pamd, run_id: &str) -> Vec<Value> {
    events(pamd, Some("run."))
        .await
        .into_iter()
        .filter(|e| e["payload"]["run_id"] == run_id)
        .collect()
}

/// The host object (GET).
pub async fn host(pamd: &Pamd, name: &str) -> Value {
    pamd.get(&format!("/api/v1/hosts/{name}"))
        .await
        .unwrap_or(Value::Null)
}

/// Waits until host `name` is online.
pub async fn wait_online(pamd: &Pamd, name: &str) {
    eventually(
        Duration::from_secs(30),
        &format!("host {name} online"),
        || async { (host(pamd, name).await["status"]["phase"] == "online").then_some(()) },
    )
    .await
}
