//! A pamd restarted right after a crash comes up on its own,
//! whatever state its embedded PostgreSQL was left in: a postmaster that is
//! a zombie, pid files naming a pid that now belongs to another process, a
//! backend still attached to the old shared memory, a postmaster in crash
//! recovery or still shutting down. And writes pamd acknowledged before the
//! crash are still there after it.
//!
//! Each test starts the real `pamd` binary on a temp data dir, kills parts
//! of the stack with signals, starts pamd again at once and waits for
//! `/readyz`.
//!
//! The test process makes itself a child subreaper (Linux `prctl`): the
//! postmaster (orphaned when `pg_ctl start` exits) and its backends are
//! reparented to it, so after a SIGKILL they stay zombies until the test
//! reaps them. That is the state a container leaves (its PID 1 often
//! never reaps), made certain whatever the machine's PID 1 does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

#[path = "common/pamd_bin.rs"]
mod pamd_bin;
use pamd_bin::Scratch;

/// How long a restarted pamd may take to serve (crash recovery included).
const READY_WITHIN: Duration = Duration::from_secs(60);

impl Scratch {
    /// On drop, kills what a failed test left running in it
    /// ([`kill_left`]).
    fn new() -> Self {
        become_subreaper();
        Scratch::with_cleanup("pam-crash", kill_left)
    }

    fn socket_lock(&self) -> PathBuf {
        self.data_dir().join("run/.s.PGSQL.5432.lock")
    }

    fn postmaster(&self) -> u32 {
        first_line_pid(&self.pid_file())
            .unwrap_or_else(|| panic!("no pid in {}", self.pid_file().display()))
    }

    /// The SysV shared memory segment (key, id) the running postmaster
    /// recorded in line 7 of its pid file.
    fn shm_segment(&self) -> (u64, u64) {
        let text = std::fs::read_to_string(self.pid_file()).unwrap();
        let line = text
            .lines()
            .nth(6)
            .expect("line 7: shared memory key and id");
        let mut it = line.split_whitespace().map(|n| n.parse().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    }

    fn start_pamd(&self, name: &str) -> Pamd {
        let log = self.root.join(format!("{name}.log"));
        let (child, port) = pamd_bin::spawn_pamd(&self.data_dir(), &log);
        Pamd {
            child,
            log,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    /// SIGKILLs pamd, the postmaster and every child of the postmaster with
    /// one `kill`, and reaps pamd (only pamd: the rest stay zombies).
    fn kill_stack(&self, pamd: &mut Pamd) {
        let postmaster = self.postmaster();
        let mut pids = vec![pamd.child.id(), postmaster];
        pids.extend(children_of(postmaster));
        kill(libc::SIGKILL, &pids);
        pamd.child.wait().unwrap();
    }
}

/// Kills what a failed test left running in `scratch`: a postmaster or
/// backends get SIGQUIT (immediate shutdown, which removes the shared
/// memory), then SIGKILL for what is left after 5 s.
fn kill_left(scratch: &Scratch) {
    let left = || -> Vec<u32> {
        processes()
            .into_iter()
            .filter(|p| p.state != 'Z')
            .filter(|p| cwd_of(p.pid).is_some_and(|c| c.starts_with(&scratch.root)))
            .map(|p| p.pid)
            .collect()
    };
    kill(libc::SIGQUIT, &left());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !left().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    kill(libc::SIGKILL, &left());
    reap_zombies();
}

/// A fresh data dir and a pamd ready on it (the first start creates the
/// cluster: slower).
async fn first_pamd() -> (Scratch, Pamd) {
    let scratch = Scratch::new();
    let mut pamd = scratch.start_pamd("first");
    pamd.wait_ready(Duration::from_secs(90)).await;
    (scratch, pamd)
}

struct Pamd {
    child: Child,
    log: PathBuf,
    base: String,
    http: reqwest::Client,
}

impl Pamd {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Prints `label` and what pamd logged about its cluster (seen with
    /// `--no-capture`).
    fn show(&self, label: &str) {
        eprintln!("{label}");
        for line in self.log().lines().filter(|l| l.contains("embedded_pg")) {
            eprintln!("  {line}");
        }
    }

    /// Waits for `/readyz` to answer 200; panics with pamd's log if pamd
    /// exits first or the bound passes. Returns how long it took.
    async fn wait_ready(&mut self, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "pamd exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            if self.ready().await {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "pamd not ready within {within:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn ready(&self) -> bool {
        let resp = self.http.get(format!("{}/readyz", self.base)).send().await;
        resp.is_ok_and(|r| r.status().is_success())
    }

    /// SIGTERM; pamd stops its cluster and exits 0.
    fn stop(mut self) {
        kill(libc::SIGTERM, &[self.child.id()]);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}:\n{}", self.log());
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pamd did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pamd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An operator client for one data dir (its admin token).
struct Api {
    http: reqwest::Client,
    token: String,
}

impl Api {
    fn new(data_dir: &Path) -> Self {
        let token = std::fs::read_to_string(data_dir.join("admin.token")).unwrap();
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            token: token.trim().to_string(),
        }
    }

    /// Applies project `name`; Ok only once pamd acknowledged it.
    async fn apply_project(&self, base: &str, name: &str) -> Result<(), String> {
        let yaml =
            format!("apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: {name}}}\nspec: {{displayName: Crash}}\n");
        let body = serde_json::json!({"files": [{"name": "p.yaml", "content": yaml}]});
        let resp = self
            .http
            .post(format!("{base}/api/v1/apply"))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!(
                "{}: {}",
                resp.status(),
                resp.text().await.unwrap_or_default()
            ));
        }
        Ok(())
    }

    async fn project_exists(&self, base: &str, name: &str) -> bool {
        let resp = self
            .http
            .get(format!("{base}/api/v1/projects/{name}"))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        match resp.status().as_u16() {
            200 => true,
            404 => false,
            s => panic!(
                "GET project {name}: {s}: {}",
                resp.text().await.unwrap_or_default()
            ),
        }
    }
}

/// The whole stack SIGKILLed at once, pamd restarted after 0 to 500 ms
/// while the postmaster and backends are zombies: five times over.
#[tokio::test(flavor = "multi_thread")]
async fn comes_back_after_the_whole_stack_is_killed() {
    let (scratch, mut pamd) = first_pamd().await;
    let mut leaked = Vec::new();
    for (cycle, delay_ms) in [0, 100, 250, 500, 0].into_iter().enumerate() {
        leaked.push(scratch.shm_segment());
        scratch.kill_stack(&mut pamd);
        std::thread::sleep(Duration::from_millis(delay_ms));
        pamd = scratch.start_pamd(&format!("restart-{cycle}"));
        let took = pamd.wait_ready(READY_WITHIN).await;
        pamd.show(&format!(
            "cycle {cycle}: restarted {delay_ms} ms after the kill, ready in {took:?}"
        ));
        reap_zombies();
    }
    pamd.stop();
    assert!(!scratch.pid_file().exists(), "SIGTERM stops the cluster");
    // PostgreSQL removes an unattached old segment of its cluster when it
    // starts: the crashes leak no shared memory.
    let segments = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    for (key, id) in leaked {
        let still = segments.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 1 && f[0] == key.to_string() && f[1] == id.to_string()
        });
        assert!(
            !still,
            "shared memory segment key {key} id {id} leaked:\n{segments}"
        );
    }
}

/// Writes in flight when the stack is killed: every write pamd
/// acknowledged is there after the restart (fsync is on in pamd's cluster).
#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_writes_survive_a_kill_mid_write() {
    let (scratch, mut pamd) = first_pamd().await;
    let api = std::sync::Arc::new(Api::new(&scratch.data_dir()));
    let mut acked_all = Vec::new();
    for cycle in 0..3 {
        let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = {
            let (api, acked, base) = (api.clone(), acked.clone(), pamd.base.clone());
            // Writes until one fails; returns that failure.
            tokio::spawn(async move {
                let mut i = 0;
                loop {
                    let name = format!("c{cycle}-p{i}");
                    if let Err(e) = api.apply_project(&base, &name).await {
                        return e;
                    }
                    acked.lock().unwrap().push(name);
                    i += 1;
                }
            })
        };
        // Kill while writes keep coming: the next one is in flight.
        while acked.lock().unwrap().len() < 5 + cycle * 5 {
            if writer.is_finished() {
                let e = writer.await.unwrap();
                panic!("a write failed before the kill: {e}\n{}", pamd.log());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        scratch.kill_stack(&mut pamd);
        writer.await.unwrap();
        let acked = acked.lock().unwrap().clone();
        pamd = scratch.start_pamd(&format!("restart-{cycle}"));
        let took = pamd.wait_ready(READY_WITHIN).await;
        eprintln!(
            "cycle {cycle}: {} writes acknowledged, ready in {took:?}",
            acked.len()
        );
        acked_all.extend(acked);
        for name in &acked_all {
            assert!(
                api.project_exists(&pamd.base, name).await,
                "acknowledged project {name} lost in the crash"
            );
        }
        reap_zombies();
    }
    pamd.stop();
}

/// pid files naming a pid that now belongs to another process: a plain
/// process, then the postmaster of another cluster (the shared test
/// cluster, which must be left alone).
#[tokio::test(flavor = "multi_thread")]
async fn comes_back_when_the_pid_files_name_other_processes() {
    let (scratch, mut pamd) = first_pamd().await;

    scratch.kill_stack(&mut pamd);
    reap_zombies();
    let mut sleeper = Command::new("sleep").arg("120").spawn().unwrap();
    set_pid(&scratch.pid_file(), sleeper.id());
    set_pid(&scratch.socket_lock(), sleeper.id());
    pamd = scratch.start_pamd("pid-is-a-sleep");
    pamd.wait_ready(READY_WITHIN).await;
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the other process is left alone"
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();

    let admin = pam_testkit::testdb::admin_url().await.unwrap();
    let other_pid_file = pam_testkit::testdb::test_cluster_dir().join("postgres/postmaster.pid");
    let other = first_line_pid(&other_pid_file).unwrap();
    scratch.kill_stack(&mut pamd);
    reap_zombies();
    set_pid(&scratch.pid_file(), other);
    set_pid(&scratch.socket_lock(), other);
    pamd = scratch.start_pamd("pid-is-another-postmaster");
    pamd.wait_ready(READY_WITHIN).await;
    assert_eq!(
        first_line_pid(&other_pid_file),
        Some(other),
        "the other cluster is left alone"
    );
    assert!(process(other).is_some_and(|p| p.state != 'Z'));
    use sqlx::Connection;
    let conn = sqlx::PgConnection::connect(&admin).await;
    assert!(conn.is_ok(), "the other cluster still serves: {conn:?}");
    pamd.stop();
}

/// A backend of the killed postmaster still attached to its shared memory
/// (here: stopped with SIGSTOP): PostgreSQL refuses to start until it is
/// gone. pamd waits for it, naming its pid, and comes up once it exits.
#[tokio::test(flavor = "multi_thread")]
async fn waits_for_an_orphaned_backend_to_exit() {
    let (scratch, mut pamd) = first_pamd().await;
    let postmaster = scratch.postmaster();
    let backend = *children_of(postmaster).first().expect("a backend");
    kill(libc::SIGSTOP, &[backend]);
    kill(libc::SIGKILL, &[pamd.child.id(), postmaster]);
    pamd.child.wait().unwrap();
    pamd = scratch.start_pamd("orphan");
    // Still waiting after 3 s: the backend holds the shared memory.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        assert!(
            pamd.child.try_wait().unwrap().is_none(),
            "pamd gave up:\n{}",
            pamd.log()
        );
        assert!(
            !pamd.ready().await,
            "ready while an old backend runs:\n{}",
            pamd.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        pamd.log().contains(&backend.to_string()),
        "the log names pid {backend}:\n{}",
        pamd.log()
    );
    kill(libc::SIGCONT, &[backend]);
    pamd.wait_ready(READY_WITHIN).await;
    reap_zombies();
    pamd.stop();
}

/// Only pamd and one backend killed: the surviving postmaster runs crash
/// recovery, and pamd (restarted at once) waits for it and reuses it. Then
/// pamd killed while its postmaster starts a fast shutdown: pamd waits for
/// it to end and starts a new one.
#[tokio::test(flavor = "multi_thread")]
async fn waits_for_a_postmaster_in_recovery_or_shutting_down() {
    let (scratch, mut pamd) = first_pamd().await;

    for cycle in 0..2 {
        let postmaster = scratch.postmaster();
        let backend = *children_of(postmaster).first().expect("a backend");
        kill(libc::SIGKILL, &[pamd.child.id(), backend]);
        pamd.child.wait().unwrap();
        pamd = scratch.start_pamd(&format!("recovery-{cycle}"));
        let took = pamd.wait_ready(READY_WITHIN).await;
        pamd.show(&format!("recovery {cycle}: ready in {took:?}"));
        assert_eq!(
            scratch.postmaster(),
            postmaster,
            "the recovered postmaster is reused"
        );
        reap_zombies();
    }

    for cycle in 0..2 {
        let postmaster = scratch.postmaster();
        kill(libc::SIGKILL, &[pamd.child.id()]);
        kill(libc::SIGINT, &[postmaster]);
        pamd.child.wait().unwrap();
        pamd = scratch.start_pamd(&format!("shutdown-{cycle}"));
        let took = pamd.wait_ready(READY_WITHIN).await;
        pamd.show(&format!("shutdown {cycle}: ready in {took:?}"));
        reap_zombies();
    }
    pamd.stop();
}

// ---- processes ----

#[allow(unsafe_code)]
fn become_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag; no memory is
    // passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(
        rc,
        0,
        "prctl(PR_SET_CHILD_SUBREAPER): {}",
        std::io::Error::last_os_error()
    );
}

/// Reaps this process's zombie children other than pamd (std's `Child`
/// reaps those): killed postmasters and backends reparented to us.
#[allow(unsafe_code)]
fn reap_zombies() {
    let me = std::process::id();
    for p in processes() {
        if p.ppid == me && p.state == 'Z' && p.comm != "pamd" {
            let mut status = 0;
            // SAFETY: `status` is a valid out pointer for the call.
            unsafe { libc::waitpid(p.pid as i32, &mut status, libc::WNOHANG) };
        }
    }
}

struct Proc {
    pid: u32,
    ppid: u32,
    state: char,
    comm: String,
}

/// `/proc/<pid>/stat`: `pid (comm) state ppid …`; comm may hold spaces
/// and parentheses, so it ends at the last `)`.
fn process(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let mut rest = stat[close + 1..].split_whitespace();
    Some(Proc {
        pid,
        comm: stat[open + 1..close].to_string(),
        state: rest.next()?.chars().next()?,
        ppid: rest.next()?.parse().ok()?,
    })
}

fn processes() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(process)
        .collect()
}

fn children_of(pid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.ppid == pid && p.state != 'Z')
        .map(|p| p.pid)
        .collect()
}

fn cwd_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// Sends `signal` to each of `pids`, one right after the other; a pid
/// already gone is fine (a backend may exit while we list them).
#[allow(unsafe_code)]
fn kill(signal: i32, pids: &[u32]) {
    for &pid in pids {
        // SAFETY: kill has no memory effects.
        let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
        let e = std::io::Error::last_os_error();
        assert!(
            rc == 0 || e.raw_os_error() == Some(libc::ESRCH),
            "kill({pid}, {signal}): {e}"
        );
    }
}

fn first_line_pid(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// Rewrites line 1 (the pid) of a PostgreSQL lock file, as if the pid had
/// been reused.
fn set_pid(file: &Path, pid: u32) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let rest = text.split_once('\n').map(|(_, r)| r).unwrap_or("");
    std::fs::write(file, format!("{pid}\n{rest}")).unwrap();
}
