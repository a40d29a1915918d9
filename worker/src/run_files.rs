//! Where a run's files live on the worker's disk: one directory per run,
//! `<data_dir>/runs/<run_id>/`, holding each attempt's log, transcript
//! (named by [`LogFile`]), environment file and workspace state.

use std::path::{Path, PathBuf};

use pam_manifests::protocol::LogFile;
use uuid::Uuid;

/// The run's directory.
pub fn run_dir(data_dir: &Path, run_id: Uuid) -> PathBuf {
    data_dir.join("runs").join(run_id.to_string())
}

/// One of an attempt's files ([`LogFile::file_name`]).
pub fn attempt_file(data_dir: &Path, run_id: Uuid, attempt: i32, file: LogFile) -> PathBuf {
    run_dir(data_dir, run_id).join(file.file_name(attempt))
}

/// The attempt's log.
pub fn log_path(data_dir: &Path, run_id: Uuid, attempt: i32) -> PathBuf {
    attempt_file(data_dir, run_id, attempt, LogFile::Log)
}

/// The attempt's environment, written by the spawn for the wrapper.
pub fn env_file(data_dir: &Path, run_id: Uuid, attempt: i32) -> PathBuf {
    run_dir(data_dir, run_id).join(format!("{attempt}.env"))
}

/// The attempt's workspace state.
pub fn workspace_state(data_dir: &Path, run_id: Uuid, attempt: i32) -> PathBuf {
    run_dir(data_dir, run_id).join(format!("{attempt}.workspace.json"))
}
