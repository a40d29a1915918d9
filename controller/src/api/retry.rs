//! A request's read-modify-write that lost a race it did not cause.
//!
//! Handlers that read a row and write it back under its resourceVersion
//! guard (a host's register and heartbeat, a run's stop)
//! can meet a concurrent write to the same row — a loop's condition
//! update, another request — between their read and their write. The
//! caller never named a resourceVersion, so the 409 is not theirs to
//! handle: the whole transaction runs again on the row as it is now.

use axum::http::StatusCode;

use super::ApiError;

/// How often a lost race is run again before its 409 is answered.
const CONFLICT_RETRIES: usize = 8;

pub(super) fn is_conflict(e: &ApiError) -> bool {
    e.status == StatusCode::CONFLICT && e.code == "conflict"
}

/// Runs `once` (a whole transaction) again while it fails with a
/// resourceVersion conflict, up to [`CONFLICT_RETRIES`] times.
pub async fn retry_conflicts<T, F, Fut>(mut once: F) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let mut tries = 0;
    loop {
        match once().await {
            Err(e) if is_conflict(&e) && tries < CONFLICT_RETRIES => tries += 1,
            other => return other,
        }
    }
}
