//! A read-modify-write that lost a race it did not cause.
//!
//! Code that reads a row and writes it back under its resourceVersion
//! guard (a host's register and heartbeat, a run's stop) can meet a
//! concurrent write to the same row — a loop's condition update, another
//! request — between its read and its write. The caller never named a
//! resourceVersion, so the conflict is not theirs to handle: the whole
//! transaction runs again on the row as it is now.

/// How often a lost race is run again before its conflict is answered.
const CONFLICT_RETRIES: usize = 8;

/// An error that may be a lost race ([`retry_conflicts`] runs again).
pub trait Conflict {
    /// Whether it is a resourceVersion conflict.
    fn is_conflict(&self) -> bool;
}

impl Conflict for pam_store::StoreError {
    fn is_conflict(&self) -> bool {
        matches!(self, pam_store::StoreError::Conflict(_))
    }
}

/// Runs `once` (a whole transaction) again while it fails with a
/// resourceVersion conflict, up to [`CONFLICT_RETRIES`] times.
pub async fn retry_conflicts<T, E, F, Fut>(mut once: F) -> Result<T, E>
where
    E: Conflict,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut tries = 0;
    loop {
        match once().await {
            Err(e) if e.is_conflict() && tries < CONFLICT_RETRIES => tries += 1,
            other => return other,
        }
    }
}
