//! Where an attempt's files are read from: the archive (a finished
//! attempt archived by this pamd, `[logs] archive_dir`), else the worker
//! of the host that ran it, through this pamd's watch of that host (with
//! the chunk cache for finished attempts) — and the clear answer when
//! neither can serve: the run never started, its host is offline or
//! gone, its worker is too old, or another replica holds its watch.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use axum::http::StatusCode;
use bytes::Bytes;
use pam_manifests::protocol::{LogFile, LOG_CHUNK_MAX};
use pam_manifests::state::HostStatus;
use pam_store::{Host, Run};
use uuid::Uuid;

use super::channel::{ReadError, Reply};
use super::{Logs, READ_TIMEOUT};
use crate::api::{ApiError, AppState};
use crate::clock::ts;
use crate::events::topic;

/// The bytes of one chunk: `[index · CHUNK, index · CHUNK + CHUNK)`.
pub const CHUNK: u64 = LOG_CHUNK_MAX;

/// Where an attempt's files are read from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// This pamd's archive: the attempt's directory.
    Archive(PathBuf),
    /// The host's worker, through this pamd's watch of it.
    Worker(Uuid),
}

/// One attempt of one run, and where its files are read from.
#[derive(Debug, Clone)]
pub struct Located {
    pub run: Uuid,
    /// The run's name, for messages.
    pub name: String,
    pub attempt: i32,
    pub from: Origin,
    /// The host that ran it, for messages.
    pub host: String,
}

/// Finds `attempt` (default: the current one) of `run` and where to read
/// it, or the error that says why it cannot be read here.
pub async fn locate(
    st: &AppState,
    run: &Run,
    attempt: Option<i32>,
    file: LogFile,
) -> Result<Located, ApiError> {
    let name = &run.name;
    if run.attempt < 1 {
        return Err(ApiError::not_found(format!(
            "run {name:?} has no {}: it never started",
            file.noun()
        )));
    }
    let attempt = attempt.unwrap_or(run.attempt);
    if attempt < 1 || attempt > run.attempt {
        return Err(ApiError::not_found(format!(
            "run {name:?} has no attempt {attempt} (its attempts are 1 to {})",
            run.attempt
        )));
    }
    let logs = &st.logs;
    let finished = attempt < run.attempt || !run.status.is_live();
    if finished {
        if let Some(dir) = logs.archived(run.id, attempt) {
            return Ok(Located {
                run: run.id,
                name: name.clone(),
                attempt,
                from: Origin::Archive(dir),
                host: String::new(),
            });
        }
    }
    let mut tx = st.ctx.store.begin().await?;
    let host_id = if attempt == run.attempt {
        run.host_id
    } else {
        // The host of an earlier attempt: its `run.spawning` says.
        tx.run_events_of_topic(topic::RUN_SPAWNING, &[run.id])
            .await?
            .iter()
            .rev()
            .find(|e| e.payload["attempt"].as_i64() == Some(i64::from(attempt)))
            .and_then(|e| e.payload["host_id"].as_str()?.parse().ok())
    };
    let Some(host_id) = host_id else {
        let which = if attempt == run.attempt {
            String::new()
        } else {
            format!(" of attempt {attempt}")
        };
        return Err(ApiError::not_found(format!(
            "run {name:?} has no {}{which}: it never started",
            file.noun()
        )));
    };
    let host = tx.get::<Host>(host_id).await?;
    drop(tx);
    let host_name = host
        .as_ref()
        .map_or(host_id.to_string(), |h| h.name.clone());
    let located = Located {
        run: run.id,
        name: name.clone(),
        attempt,
        from: Origin::Worker(host_id),
        host: host_name.clone(),
    };
    if logs.channels.serves(host_id) || logs.cache.size((run.id, attempt, file)).is_some() {
        return Ok(located);
    }
    let what = format!("the {} of run {name:?}", file.noun());
    let Some(host) = host else {
        return Err(unavailable(
            "host_offline",
            format!("{what} lived on host {host_id}, which is no longer registered, and it was not archived"),
            None,
        ));
    };
    if host.status != HostStatus::Online {
        let since = host
            .last_seen_at
            .map_or(" (never seen)".to_string(), |t| format!(" since {}", ts(t)));
        return Err(unavailable(
            "host_offline",
            format!("{what} lives on host {host_name:?}, offline{since}"),
            None,
        ));
    }
    if st.ctx.wakeups.watches.watched(host_id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "worker_too_old",
            format!("{what} lives on host {host_name:?}, whose pam-worker cannot serve logs (older than this pamd, or its watch is not upgraded): upgrade pam-worker there"),
        ));
    }
    Err(unavailable(
        "log_elsewhere",
        format!("{what} lives on host {host_name:?}, whose watch another pamd replica holds: ask again (pamctl tries its other --server URLs)"),
        Some(1),
    ))
}

/// A 503 with `code`.
fn unavailable(code: &'static str, message: String, retry_after: Option<u64>) -> ApiError {
    let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
    e.retry_after = retry_after;
    e
}

impl Located {
    /// Chunk `index` of `file` (shorter at the end of the file).
    pub async fn chunk(&self, logs: &Logs, file: LogFile, index: u64) -> Result<Reply, ReadError> {
        let offset = index * CHUNK;
        match &self.from {
            Origin::Archive(dir) => {
                let path = dir.join(file.file_name(self.attempt));
                let file_noun = file.noun();
                tokio::task::spawn_blocking(move || read_file(&path, offset, CHUNK, file_noun))
                    .await
                    .unwrap_or_else(|e| Err(io(e)))
            }
            Origin::Worker(host) => {
                let key = (self.run, self.attempt, file);
                if let (Some(size), Some(bytes)) =
                    (logs.cache.size(key), logs.cache.get(key, index))
                {
                    return Ok(Reply {
                        size,
                        done: true,
                        bytes,
                    });
                }
                let r = logs
                    .channels
                    .read(
                        *host,
                        self.run,
                        self.attempt,
                        file,
                        offset,
                        CHUNK,
                        READ_TIMEOUT,
                    )
                    .await?;
                // A finished file's chunk never changes: whole ones, and
                // the last, are kept.
                let whole =
                    r.bytes.len() as u64 == CHUNK || offset + r.bytes.len() as u64 == r.size;
                if r.done && whole && !r.bytes.is_empty() {
                    logs.cache.set_size(key, r.size);
                    logs.cache.put(key, index, r.bytes.clone());
                }
                Ok(r)
            }
        }
    }

    /// The file's size and whether it is done, reading no bytes.
    pub async fn stat(&self, logs: &Logs, file: LogFile) -> Result<(u64, bool), ReadError> {
        match &self.from {
            Origin::Archive(dir) => {
                let path = dir.join(file.file_name(self.attempt));
                let noun = file.noun();
                let r = tokio::task::spawn_blocking(move || read_file(&path, 0, 0, noun))
                    .await
                    .unwrap_or_else(|e| Err(io(e)))?;
                Ok((r.size, true))
            }
            Origin::Worker(host) => {
                if let Some(size) = logs.cache.size((self.run, self.attempt, file)) {
                    return Ok((size, true));
                }
                let r = logs
                    .channels
                    .read(*host, self.run, self.attempt, file, 0, 0, READ_TIMEOUT)
                    .await?;
                Ok((r.size, r.done))
            }
        }
    }

    /// What a failed read answers, when it fails before the answer began.
    pub fn error(&self, file: LogFile, e: ReadError) -> ApiError {
        let what = format!("the {} of run {:?}", file.noun(), self.name);
        let host = &self.host;
        match e {
            ReadError::Worker { code, message } if code == "not_found" => {
                ApiError::not_found(format!(
                    "run {:?} has no {} for attempt {} ({message})",
                    self.name,
                    file.noun(),
                    self.attempt
                ))
            }
            ReadError::Worker { message, .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "worker_error",
                format!("{what}: host {host:?} answered: {message}"),
            ),
            ReadError::Timeout => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "worker_timeout",
                format!(
                    "{what}: host {host:?} did not answer within {}s",
                    READ_TIMEOUT.as_secs()
                ),
            ),
            ReadError::NoChannel | ReadError::Gone => unavailable(
                "worker_unavailable",
                format!("{what}: the watch of host {host:?} ended while it was read; ask again"),
                Some(1),
            ),
        }
    }
}

fn io(e: impl std::fmt::Display) -> ReadError {
    ReadError::Worker {
        code: "io".into(),
        message: format!("reading the archive: {e}"),
    }
}

/// `limit` bytes of an archived file at `offset`, as a worker would
/// answer them.
fn read_file(
    path: &std::path::Path,
    offset: u64,
    limit: u64,
    noun: &str,
) -> Result<Reply, ReadError> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReadError::Worker {
                code: "not_found".into(),
                message: format!("the archive holds no {noun} of it"),
            })
        }
        Err(e) => return Err(io(e)),
    };
    let size = f.metadata().map_err(io)?.len();
    let n = limit.min(size.saturating_sub(offset)) as usize;
    let mut buf = vec![0; n];
    f.read_exact_at(&mut buf, offset).map_err(io)?;
    Ok(Reply {
        size,
        done: true,
        bytes: Bytes::from(buf),
    })
}
