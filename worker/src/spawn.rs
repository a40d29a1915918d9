//! Turning a [`DesiredRun`] into a tmux session that runs
//! `pam-worker wrap … -- <provider command>`.
//!
//! The run's environment (provider credentials among it) is not put on any
//! command line, where `ps` would show it: it goes to a 0600 file
//! `<data_dir>/runs/<run_id>/<attempt>.env` that the wrapper reads and
//! deletes before it starts the provider.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use pam_manifests::protocol::DesiredRun;

use crate::config::Config;
use crate::providers::{command_line, ProviderKind};
use crate::tmux::{SessionSpec, Tmux};

/// Where the wrapper finds the run's environment.
pub fn env_file(data_dir: &Path, run: &DesiredRun) -> PathBuf {
    data_dir
        .join("runs")
        .join(run.run_id.to_string())
        .join(format!("{}.env", run.attempt))
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
    let kind: ProviderKind = run.provider.parse()?;
    let cl = command_line(run, &config.providers)?;
    let cwd = PathBuf::from(&run.cwd);
    anyhow::ensure!(
        cwd.is_dir(),
        "run cwd {} is not a directory on this host",
        run.cwd
    );
    let env_path = env_file(data_dir, run);
    write_env_file(&env_path, &cl.env)?;
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
        "--".into(),
    ];
    argv.extend(cl.argv);
    Ok(SessionSpec {
        name: run.session_name.clone(),
        cwd,
        env: BTreeMap::from([
            ("PAM_RUN_ID".to_string(), run.run_id.to_string()),
            ("PAM_ATTEMPT".to_string(), run.attempt.to_string()),
        ]),
        argv,
    })
}

/// Creates the session for `run` on `tmux`.
pub async fn spawn(
    tmux: &Tmux,
    worker_exe: &Path,
    data_dir: &Path,
    config: &Config,
    run: &DesiredRun,
) -> anyhow::Result<()> {
    let spec = session_spec(worker_exe, data_dir, config, run)?;
    tmux.new_session(&spec).await.with_context(|| {
        format!(
            "create tmux session {} for run {}",
            run.session_name, run.run_id
        )
    })
}

fn write_env_file(path: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<()> {
    std::fs::create_dir_all(path.parent().expect("env file has a parent"))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
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
