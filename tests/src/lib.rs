//! Harness for end-to-end tests: real `pamd` processes on real PostgreSQL
//! (a fresh database on the test server per pamd, or pamd's own embedded
//! cluster), real `pamctl` invocations with an isolated environment;
//! [`worker`] adds real pam-worker processes on private tmux servers.

pub mod agents;
pub mod git;
pub mod oidc;
pub mod worker;

pub mod bench;
pub mod fleet;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A workspace binary (`pamd`, `pamctl`, `pam-worker`, `pam-fake-provider`)
/// from the target directory this test was built into.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/debug/deps/<test> → target/debug/<name>; a binary of this
    // crate (a benchmark) sits in target/<profile>/ itself.
    let parent = exe.parent().expect("target dir layout");
    let dir = if parent.file_name().is_some_and(|n| n == "deps") {
        parent.parent().expect("target dir layout")
    } else {
        parent
    };
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is not built; run the tests through `cargo nextest run --workspace` (it builds every binary)",
        p.display()
    );
    p
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running pamd. Killed (SIGKILL) when dropped, with its embedded
/// PostgreSQL if it has one.
pub struct Pamd {
    pub url: String,
    pub token: String,
    pub data_dir: PathBuf,
    /// Empty when pamd runs its embedded PostgreSQL.
    pub database_url: String,
    pub config: PathBuf,
    /// The CA that pamd's HTTPS certificate chains to (TLS tests).
    pub ca_file: Option<PathBuf>,
    listen: String,
    args: Vec<String>,
    log_filter: String,
    child: Option<Child>,
    _tmp: tempfile::TempDir,
}

/// Extra TOML for pamd's config file, e.g. shortened thresholds:
/// `"[hosts]\noffline_after_seconds = 3\n"`.
#[derive(Default)]
pub struct PamdOptions {
    pub config_toml: String,
    /// Extra command-line arguments (e.g. `--local-worker`).
    pub args: Vec<String>,
    /// Written to `<data_dir>/worker.toml` before start (the local worker's
    /// config, e.g. a private tmux socket).
    pub worker_toml: Option<String>,
    /// pamd's log filter (`PAM_LOG`); `info` when None.
    pub log_filter: Option<String>,
    /// Run pamd on its embedded PostgreSQL (no `--database-url`): a
    /// private cluster in its data dir, made at the first start.
    pub embedded: bool,
    /// Serve HTTPS (the caller passes --tls-cert/--tls-key or
    /// --tls-self-signed in `args`); the URL is https:// and every client
    /// of the harness trusts this CA file.
    pub https_ca: Option<PathBuf>,
    /// `--tls-self-signed`: HTTPS with the CA pamd makes in
    /// `<data_dir>/tls/ca.pem`, which the harness's clients trust.
    pub tls_self_signed: bool,
    /// `--database-url` to pass as is (an external PostgreSQL the test
    /// started); otherwise a fresh database on the test cluster.
    pub database_url: Option<String>,
}

impl Pamd {
    /// Starts pamd on a fresh database (or its embedded cluster) and waits
    /// for /readyz.
    pub async fn start(opts: PamdOptions) -> anyhow::Result<Pamd> {
        let database_url = if let Some(url) = opts.database_url.clone() {
            url
        } else if opts.embedded {
            String::new()
        } else {
            pam_testkit::testdb::fresh_database_url().await?
        };
        let tmp = tempfile::Builder::new().prefix("pam-e2e").tempdir()?;
        let data_dir = tmp.path().join("data");
        std::fs::create_dir_all(&data_dir)?;
        let config = tmp.path().join("pamd.toml");
        std::fs::write(&config, &opts.config_toml)?;
        if let Some(w) = &opts.worker_toml {
            std::fs::write(data_dir.join("worker.toml"), w)?;
        }
        let listen = format!("127.0.0.1:{}", free_port());
        let mut args = opts.args;
        let mut https_ca = opts.https_ca;
        if opts.tls_self_signed {
            args.push("--tls-self-signed".into());
            https_ca = Some(data_dir.join("tls/ca.pem"));
        }
        let scheme = if https_ca.is_some() { "https" } else { "http" };
        let mut p = Pamd {
            url: format!("{scheme}://{listen}"),
            ca_file: https_ca,
            token: String::new(),
            data_dir,
            database_url,
            config,
            listen,
            args,
            log_filter: opts.log_filter.unwrap_or_else(|| "info".into()),
            child: None,
            _tmp: tmp,
        };
        p.spawn().await?;
        // None with `[api] admin_token_file`: the test knows its token.
        p.token = std::fs::read_to_string(p.data_dir.join("admin.token"))
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        Ok(p)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("pamd.log"))?;
        let mut cmd = Command::new(bin("pamd"));
        cmd.arg("--config")
            .arg(&self.config)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen")
            .arg(&self.listen);
        if !self.database_url.is_empty() {
            cmd.arg("--database-url").arg(&self.database_url);
        }
        let child = cmd
            .args(&self.args)
            .env("PAM_LOG", &self.log_filter)
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("start pamd")?;
        self.child = Some(child);
        // initdb on a busy 2-core machine takes a while.
        let ready_within = if self.database_url.is_empty() { 90 } else { 30 };
        self.wait_ready(Duration::from_secs(ready_within)).await
    }

    async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            // Anew each time: a self-signed CA appears once pamd made it.
            let client = self.http();
            if let Some(c) = self.child.as_mut() {
                if let Some(status) = c.try_wait()? {
                    bail!("pamd exited with {status}; log:\n{}", self.log());
                }
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.url)).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("pamd not ready after {timeout:?}; log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// pamd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("pamd.log")).unwrap_or_default()
    }

    /// SIGKILL, no cleanup (a crash).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts pamd again on the same data dir and database.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn().await
    }

    /// Starts pamd after [`Pamd::kill9`] (without killing anything).
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.child.is_none(), "pamd is still running");
        self.spawn().await
    }

    /// The embedded cluster's postmaster pid, while its pid file exists.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir.join("postgres/postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// A crash of the whole machine's pam side at once: SIGKILL to pamd,
    /// the embedded postmaster and every backend it forked, in one `kill`.
    /// Returns how many processes were killed.
    pub fn kill9_with_postgres(&mut self) -> anyhow::Result<usize> {
        let mut pids: Vec<u32> = self.pid().into_iter().collect();
        if let Some(pm) = self.postmaster_pid() {
            pids.push(pm);
            pids.extend(children_of(pm));
        }
        let status = Command::new("kill")
            .arg("-KILL")
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status()?;
        // Some backends may have exited by themselves meanwhile.
        let _ = status;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        Ok(pids.len())
    }

    /// Runs pamctl against this pamd with an isolated environment (no
    /// config file, no admin.token fallback beyond this pamd's).
    pub fn pamctl(&self, args: &[&str]) -> Output {
        self.pamctl_stdin(args, None)
    }

    /// Like [`Pamd::pamctl`], feeding `stdin`.
    pub fn pamctl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.pamctl_as(Some(&self.token), args, stdin)
    }

    /// Like [`Pamd::pamctl_stdin`] with `token` as PAM_TOKEN, or no token
    /// at all (and no admin.token to fall back on) when `None`.
    pub fn pamctl_as(&self, token: Option<&str>, args: &[&str], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut cmd = self.isolated(&bin("pamctl"), None);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(t) = token {
            cmd.env("PAM_TOKEN", t);
        }
        let mut child = cmd.spawn().expect("run pamctl");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        child.wait_with_output().expect("pamctl output")
    }

    /// `program` with pamctl's isolated environment: nothing inherited but
    /// PATH, HOME in the data dir (no config file, no admin.token but this
    /// pamd's), PAM_SERVER set to this pamd, NO_COLOR, and PAM_TOKEN when
    /// `token` is given. For tests that add environment (EDITOR) or run
    /// pamctl through a shell.
    pub fn isolated(&self, program: &std::path::Path, token: Option<&str>) -> Command {
        let home = self.data_dir.join("home");
        let _ = std::fs::create_dir_all(&home);
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("PAM_SERVER", &self.url)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        if let Some(ca) = &self.ca_file {
            cmd.env("PAM_CA_FILE", ca);
        }
        if let Some(t) = token {
            cmd.env("PAM_TOKEN", t);
        }
        cmd
    }

    /// An HTTP client for this pamd: trusting its CA when it serves TLS
    /// (the CA file may appear only once pamd made it: self-signed).
    pub fn http(&self) -> reqwest::Client {
        let mut b = reqwest::Client::builder();
        if let Some(pem) = self.ca_file.as_ref().and_then(|f| std::fs::read(f).ok()) {
            b = b.tls_built_in_root_certs(false);
            for c in reqwest::Certificate::from_pem_bundle(&pem).expect("CA PEM") {
                b = b.add_root_certificate(c);
            }
        }
        b.build().expect("http client")
    }

    /// POST `body` with the admin token: the status and the JSON body
    /// (null when there is none).
    pub async fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let r = self
            .http()
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("POST");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    }

    /// One sample of pamd's `/metrics`: the value of the line whose series
    /// (name and labels, as printed) is `series`; `None` when pamd does
    /// not answer (within 2 s) or has no such line.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let text = self.metrics_text().await?;
        let key = format!("{series} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
    }

    /// pamd's whole `/metrics` text; `None` when pamd does not answer
    /// (within 2 s).
    pub async fn metrics_text(&self) -> Option<String> {
        self.http()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()
    }

    /// GET with the admin token; JSON body.
    pub async fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        let r = self
            .http()
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await?;
        Ok(r.json().await?)
    }
}

impl Drop for Pamd {
    fn drop(&mut self) {
        // Its children too (the `--local-worker` pam-worker), which a
        // SIGKILLed pamd cannot stop and which would outlive the test.
        let children = self.pid().map(children_of).unwrap_or_default();
        self.kill9();
        for c in children {
            let _ = Command::new("kill")
                .args(["-KILL", &c.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        // A SIGKILLed pamd leaves its embedded postmaster behind: an
        // immediate shutdown, so no cluster outlives the test.
        if let Some(pm) = self.postmaster_pid() {
            let _ = Command::new("kill")
                .arg("-QUIT")
                .arg(pm.to_string())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Reads an SSE stream on a task: the seq of each event as it arrives
/// (`None` once the stream ended).
pub fn sse_seqs(mut resp: reqwest::Response) -> tokio::sync::mpsc::UnboundedReceiver<Option<i64>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = String::new();
        loop {
            match resp.chunk().await {
                Ok(Some(b)) => buf.push_str(&String::from_utf8_lossy(&b)),
                _ => {
                    let _ = tx.send(None);
                    return;
                }
            }
            while let Some(end) = buf.find("\n\n") {
                let frame: String = buf.drain(..end + 2).collect();
                for line in frame.lines() {
                    if let Some(id) = line.strip_prefix("id: ") {
                        if tx.send(id.trim().parse().ok()).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    rx
}

/// The pids whose parent is `parent` (from /proc).
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // pid (comm) state ppid …; comm may hold spaces.
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// An answer's `Retry-After` in seconds, asserting it has one.
pub fn retry_after(r: &reqwest::Response) -> u64 {
    let v = r
        .headers()
        .get("retry-after")
        .expect("a Retry-After header");
    v.to_str().unwrap().parse().expect("Retry-After in seconds")
}

/// stdout of a pamctl run, asserting success.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "pamctl failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr of a pamctl run, asserting it failed with exit code `code`.
pub fn fails(out: &Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "pamctl exit code:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `f` until it returns `Some`, or fails after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Signals and background pamctl runs (event-stream tests).
impl Pamd {
    /// pamd's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGTERM and waits up to `timeout` for pamd to exit; an error
    /// (after SIGKILL) if it did not.
    pub fn terminate(&mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let Some(mut c) = self.child.take() else {
            bail!("pamd is not running");
        };
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status()?;
        anyhow::ensure!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = c.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                bail!(
                    "pamd still running {timeout:?} after SIGTERM; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts pamctl in the background (same isolated environment as
    /// [`Pamd::pamctl`]); stdout lines arrive on the returned channel.
    pub fn pamctl_background(&self, args: &[&str]) -> Background {
        use std::io::BufRead;
        let mut child = self
            .isolated(&bin("pamctl"), Some(&self.token))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run pamctl");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Background { child, lines }
    }
}

/// A pamctl running in the background. Killed when dropped.
pub struct Background {
    pub child: Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Background {
    /// The next stdout line, failing after `timeout`.
    pub fn line(&self, timeout: Duration) -> String {
        self.lines
            .recv_timeout(timeout)
            .unwrap_or_else(|e| panic!("no pamctl output within {timeout:?}: {e}"))
    }

    /// Waits up to `timeout` for pamctl to exit: its status and stderr.
    pub fn exit(mut self, timeout: Duration) -> (std::process::ExitStatus, String) {
        use std::io::Read;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait pamctl") {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return (status, err);
            }
            assert!(
                Instant::now() < deadline,
                "pamctl still running after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
