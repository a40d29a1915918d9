//! `[logs] archive_dir`: each finished attempt's log, time index and
//! transcript copied from its worker to pamd's disk, so they outlive a
//! host that does not last (a container).
//!
//! The replica holding the host's watch does it — the only one that can
//! read that worker: every replica sees every run event through the
//! journal, and this one acts on `run.finished`, `run.failed` and
//! `run.stopped` of a host whose watch serves reads here. In the
//! background, at most [`AT_ONCE`] attempts at a time, each file
//! streamed to a temporary file and renamed into place (0600 files, 0700
//! directories), then `<attempt>.archived` written: reads prefer the
//! archive only once it holds the attempt whole. A file the worker does
//! not have (no transcript for an `exec` run) is skipped. An attempt
//! still being written (the wrapper ends a moment after its `finished`)
//! is waited for, up to [`SETTLE`]. A failure is logged and tried again
//! up to [`TRIES`] times with a growing wait; it never touches the run.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pam_manifests::protocol::{LogFile, LOG_CHUNK_MAX};
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::channel::{Channels, ReadError};
use super::READ_TIMEOUT;
use crate::events::{topic, Published};

/// Attempts archived at once.
const AT_ONCE: usize = 2;
/// Tries per attempt.
const TRIES: u32 = 5;
/// The first retry's wait, doubled after each.
const RETRY: Duration = Duration::from_secs(2);
/// How long an attempt's files may keep growing after it finished.
const SETTLE: Duration = Duration::from_secs(60);

/// The file saying the archive holds `attempt` whole.
pub fn marker(attempt: i32) -> String {
    format!("{attempt}.archived")
}

/// Starts the archiver once per pamd (with `archive_dir` set): called
/// when a watch opens, after the bus runs.
pub fn start(st: &crate::api::AppState) {
    let logs = st.logs.clone();
    let Some(dir) = logs.archive_dir.clone() else {
        return;
    };
    if logs.archiving.swap(true, Ordering::SeqCst) {
        return;
    }
    let mut rx = st.ctx.bus.subscribe();
    let channels = logs.channels.clone();
    let slots = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    tokio::spawn(async move {
        loop {
            let p = match rx.recv().await {
                Ok(p) => p,
                // Missed ones are not archived; their logs stay readable
                // from the worker.
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "log archive: fell behind the events");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            for (host, run, attempt) in ended(&p) {
                if !channels.serves(host) {
                    continue;
                }
                let (channels, dir, slots) = (channels.clone(), dir.clone(), slots.clone());
                tokio::spawn(async move {
                    let Ok(_slot) = slots.acquire_owned().await else {
                        return;
                    };
                    archive(&channels, &dir, host, run, attempt).await;
                });
            }
        }
    });
}

/// The (host, run, attempt) of each event of `p` that ends an attempt.
fn ended(p: &Published) -> Vec<(Uuid, Uuid, i32)> {
    let ends = [topic::RUN_FINISHED, topic::RUN_FAILED, topic::RUN_STOPPED];
    p.events
        .iter()
        .filter(|e| ends.contains(&e.topic.as_str()))
        .filter_map(|e| {
            let host = e.host_id?;
            // The frame's `data:` line is the event's JSON.
            let frame = &p.frames[e.frame.clone()];
            let text = std::str::from_utf8(frame).ok()?;
            let data = text.lines().find_map(|l| l.strip_prefix("data: "))?;
            let event: serde_json::Value = serde_json::from_str(data).ok()?;
            let payload = &event["payload"];
            let run = payload["run_id"].as_str()?.parse().ok()?;
            let attempt = i32::try_from(payload["attempt"].as_i64()?).ok()?;
            Some((host, run, attempt))
        })
        .collect()
}

async fn archive(channels: &Channels, dir: &Path, host: Uuid, run: Uuid, attempt: i32) {
    let mut wait = RETRY;
    for tried in 1..=TRIES {
        match archive_once(channels, dir, host, run, attempt).await {
            Ok(()) => {
                tracing::info!(%run, attempt, "log archived");
                return;
            }
            Err(e) if tried == TRIES => {
                tracing::warn!(%run, attempt, error = %e, "log archive: giving up");
            }
            Err(e) => {
                tracing::info!(%run, attempt, error = %e, "log archive failed; trying again");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
}

async fn archive_once(
    channels: &Channels,
    dir: &Path,
    host: Uuid,
    run: Uuid,
    attempt: i32,
) -> anyhow::Result<()> {
    let run_dir = dir.join(run.to_string());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&run_dir)?;
    for file in LogFile::ALL {
        let path = run_dir.join(file.file_name(attempt));
        match copy(channels, host, run, attempt, file, &path).await {
            Ok(()) => {}
            Err(Failed::Missing) => {}
            Err(Failed::Other(e)) => return Err(e),
        }
    }
    private(&run_dir.join(marker(attempt)))?.sync_all()?;
    Ok(())
}

enum Failed {
    /// The worker has no such file.
    Missing,
    Other(anyhow::Error),
}

impl From<ReadError> for Failed {
    fn from(e: ReadError) -> Failed {
        match e {
            ReadError::Worker { code, .. } if code == "not_found" => Failed::Missing,
            e => Failed::Other(anyhow::anyhow!("reading from the worker: {e:?}")),
        }
    }
}

impl From<std::io::Error> for Failed {
    fn from(e: std::io::Error) -> Failed {
        Failed::Other(e.into())
    }
}

/// Streams one file to `path` (through a temporary file beside it),
/// until the worker says it is done.
async fn copy(
    channels: &Channels,
    host: Uuid,
    run: Uuid,
    attempt: i32,
    file: LogFile,
    path: &Path,
) -> Result<(), Failed> {
    let part = PathBuf::from(format!("{}.part", path.display()));
    let mut out = private(&part)?;
    let mut offset = 0;
    let settle = tokio::time::Instant::now() + SETTLE;
    loop {
        let r = channels
            .read(
                host,
                run,
                attempt,
                file,
                offset,
                LOG_CHUNK_MAX,
                READ_TIMEOUT,
            )
            .await?;
        out.write_all(&r.bytes)?;
        offset += r.bytes.len() as u64;
        if offset >= r.size {
            if r.done {
                break;
            }
            if tokio::time::Instant::now() >= settle {
                return Err(Failed::Other(anyhow::anyhow!(
                    "the worker still writes its {} {}s after it finished",
                    file.noun(),
                    SETTLE.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    out.sync_all()?;
    std::fs::rename(&part, path)?;
    Ok(())
}

/// A new file only its owner may read, replacing any.
fn private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}
