//! Session names: the one format of a run's tmux session, which the
//! worker makes and reports and pamd checks.

use uuid::Uuid;

/// The tmux session name of a run: `pam-` and the first 8 hex digits of the
/// run id (pam-data-model.txt, `runs.session_name`).
pub fn session_name(run_id: Uuid) -> String {
    let hex = run_id.simple().to_string();
    format!("pam-{}", &hex[..8])
}

/// The prefix of every session name ([`session_name`]).
pub const SESSION_PREFIX: &str = "pam-";

/// Why a string is not a session name of the protocol's format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("session name {0:?} is not `pam-` and 8 lowercase hex digits")]
pub struct InvalidSessionName(pub String);

/// Parses a session name in the one format [`session_name`] makes: `pam-`
/// and 8 lowercase hex digits. The controller refuses any other name in a
/// worker report; the worker reports only sessions whose names parse (a
/// `pam-*` session someone else named is not pam's).
pub fn parse_session_name(s: &str) -> Result<&str, InvalidSessionName> {
    let ok = s.strip_prefix(SESSION_PREFIX).is_some_and(|hex| {
        hex.len() == 8 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    if ok {
        Ok(s)
    } else {
        // Bounded: the name may be anything a peer sent.
        Err(InvalidSessionName(s.chars().take(64).collect()))
    }
}
