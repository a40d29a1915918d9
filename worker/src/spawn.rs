//! Turning a [`DesiredRun`] into a tmux session that runs
//! `pam-worker wrap … -- <provider command>`.
//!
//! The run's environment (provider credentials among it) is not put on any
//! command line, where `ps` would show it: it goes to a 0600 file
//! `<data_dir>/runs/<run_id>/<attempt>.env` that the wrapper reads and
//! deletes before it starts the provider.
//!
//! Every session is tagged with its run and attempt when it is created
//! (see [`crate::tmux`]); [`start`] accepts only a session tagged with the
//! run and attempt it was asked for (two workers on one tmux
//! socket, and a new attempt that took the old attempt's session for its
//! own, which then ended and was reported `session_lost`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use pam_manifests::protocol::DesiredRun;

use crate::config::Config;
use crate::providers::{command_line, ProviderKind};
use crate::tmux::{SessionSpec, SessionTag, Tmux};

/// Where the wrapper finds the run's environment.
pub fn env_file(data_dir: &Path, run: &DesiredRun) -> PathBuf {
    crate::run_files::env_file(data_dir, run.run_id, run.attempt)
}

/// Builds the session for `run` and writes its env file. `worker_exe` is
/// the pam-worker binary that will act as the wrapper. An error here (an
/// unknown provider, an exec run without a command, a missing cwd) is a
/// spawn failure of the run.
pub fn session_spec(
    worker_exe: &Path,
    data_dir: &Path,
    config: &Config,
    run: &DesiredRun,
) -> anyhow::Result<SessionSpec> {
    if let Some(why) = &run.env_error {
        anyhow::bail!("the run's environment: {why}");
    }
    let kind: ProviderKind = run.provider.parse()?;
    let cl = command_line(run, &config.providers)?;
    // A workspace's worktree was made by the caller.
    let cwd = PathBuf::from(&run.cwd);
    anyhow::ensure!(
        cwd.is_dir(),
        "run cwd {} is not a directory on this host",
        run.cwd
    );
    let env_path = env_file(data_dir, run);
    write_env_file(&env_path, &cl.env)?;
    if kind != ProviderKind::Exec {
        // The transcript opens with what the agent was asked.
        let transcript = crate::transcript::path(data_dir, run.run_id, run.attempt);
        if !transcript.exists() {
            crate::transcript::start(&transcript, &run.prompt)?;
        }
    }
    let mut argv: Vec<String> = vec![
        worker_exe.to_string_lossy().into_owned(),
        "wrap".into(),
        "--run".into(),
        run.run_id.to_string(),
        "--attempt".into(),
        run.attempt.to_string(),
        "--data-dir".into(),
        data_dir.to_string_lossy().into_owned(),
        "--provider".into(),
        kind.as_str().into(),
        "--session".into(),
        run.session_name.clone(),
        "--stop-grace-seconds".into(),
        Duration::from_secs(config.stop_grace_seconds)
            .as_secs()
            .to_string(),
        "--env-file".into(),
        env_path.to_string_lossy().into_owned(),
    ];
    if run.workspace.is_some() {
        argv.push("--workspace-file".into());
        let file = crate::workspace::state_file(data_dir, run);
        argv.push(file.to_string_lossy().into_owned());
    }
    argv.push("--".into());
    argv.extend(cl.argv);
    Ok(SessionSpec {
        name: run.session_name.clone(),
        cwd,
        env: BTreeMap::from([
            ("PAM_RUN_ID".to_string(), run.run_id.to_string()),
            ("PAM_ATTEMPT".to_string(), run.attempt.to_string()),
        ]),
        argv,
        tag: Some(SessionTag {
            run_id: run.run_id,
            attempt: run.attempt,
        }),
    })
}

/// Who holds a session name, seen from the run that wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// This very run and attempt: the session is ours.
    This,
    /// An older attempt of the same run: a dead incarnation (its attempt
    /// was failed and requeued) that must make room for this one.
    OlderAttempt(SessionTag),
    /// Anything else: another run whose id shares the first 8 hex digits,
    /// a newer attempt of this run (this worker's desired set is behind),
    /// or a `pam-*` session pam did not create (no tag). Never adopted,
    /// never killed by the worker.
    Other(Option<SessionTag>),
}

/// Classifies the holder of `run`'s session name by the session's tag.
pub fn holder(tag: Option<SessionTag>, run: &DesiredRun) -> Holder {
    match tag {
        Some(t) if t.run_id == run.run_id && t.attempt == run.attempt => Holder::This,
        Some(t) if t.run_id == run.run_id && t.attempt < run.attempt => Holder::OlderAttempt(t),
        other => Holder::Other(other),
    }
}

/// How many times [`start`] tries `new-session`.
const TRIES: u64 = 4;

/// Creates the session for `run` on `tmux`, tagged with its run and
/// attempt, and accepts no session it did not create for them:
///
/// * `new-session` fails (tmux exits when its last session ends, and a
///   `new-session` racing that exit fails with "server exited
///   unexpectedly"; or the name is taken): the session now holding the name
///   decides, by its tag ([`holder`]). This run and attempt → an earlier
///   try did create it: accepted. An older attempt of this run → killed
///   (the reconcile loop's rule for dead incarnations), then tried again.
///   Anything else → an error naming the holder; it is left alone.
/// * No session holds the name → tried again, a few times.
pub async fn start(
    tmux: &Tmux,
    worker_exe: &Path,
    data_dir: &Path,
    config: &Config,
    run: &DesiredRun,
) -> anyhow::Result<()> {
    let spec = session_spec(worker_exe, data_dir, config, run)?;
    let created = create(tmux, &spec, run).await;
    if created.is_err() {
        // No wrapper of this attempt will read (and delete) the run's
        // environment: it must not stay on disk.
        let _ = std::fs::remove_file(env_file(data_dir, run));
    }
    created
}

/// [`start`]'s tries at `new-session`.
async fn create(tmux: &Tmux, spec: &SessionSpec, run: &DesiredRun) -> anyhow::Result<()> {
    let name = &run.session_name;
    let mut last = None;
    for n in 0..TRIES {
        if n > 0 {
            tokio::time::sleep(Duration::from_millis(50 * n)).await;
        }
        match tmux.new_session(spec).await {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        let Ok(Some(held)) = tmux.session(name).await else {
            continue;
        };
        match holder(held.tag, run) {
            Holder::This => {
                tracing::info!(session = %name, run_id = %run.run_id, attempt = run.attempt, "an earlier try created the session; accepted");
                return Ok(());
            }
            Holder::OlderAttempt(old) => {
                tracing::warn!(session = %name, holder = %old, "killing an older attempt's session to make room");
                tmux.kill_session(name).await?;
            }
            Holder::Other(tag) => anyhow::bail!(
                "tmux session {name} is taken by {}, not by run {} attempt {}: not adopted, left alone",
                tag.map_or("a session pam did not create".to_string(), |t| t.to_string()),
                run.run_id,
                run.attempt
            ),
        }
    }
    Err(anyhow::Error::from(last.expect("at least one try")))
        .with_context(|| format!("create tmux session {name} for run {}", run.run_id))
}

fn write_env_file(path: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<()> {
    crate::private::dir(path.parent().expect("env file has a parent"))?;
    let mut f = crate::private::file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("write {}", path.display()))?;
    f.write_all(&serde_json::to_vec(env)?)?;
    f.sync_all()?;
    Ok(())
}

/// Reads and deletes an env file written by [`session_spec`].
pub fn take_env_file(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let bytes = std::fs::read(path).with_context(|| format!("read env file {}", path.display()))?;
    let _ = std::fs::remove_file(path);
    serde_json::from_slice(&bytes).with_context(|| format!("parse env file {}", path.display()))
}
