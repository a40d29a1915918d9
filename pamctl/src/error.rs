//! [`CliError`]: what went wrong, which exit code it means, and what the
//! operator can do about it.
//!
//! Printed on stderr as `error: <message>`, then one `error: <detail>` line
//! per detail (a server's 422 `errors[].display`, a local validation error),
//! then `hint: <hint>` lines.

use std::fmt;
use std::process::ExitCode;

/// pamctl's documented exit codes (`pamctl --help`, `docs/pamctl.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success (and `diff`: no changes).
    Ok = 0,
    /// 1: `diff` found changes, `validate` found errors, a `wait` failed.
    Failed = 1,
    /// 2: usage error: bad flags, an unreadable `-f` path, unknown kind,
    /// no project, bad config file.
    Usage = 2,
    /// 3: the server refused the request (4xx: unauthorized, not found,
    /// conflict, invalid manifests, illegal transition).
    Refused = 3,
    /// 4: the server could not be reached (connection refused, DNS,
    /// timeout).
    Unreachable = 4,
    /// 5: the server failed (5xx) or answered something unreadable.
    ServerError = 5,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// The text for `pamctl --help` and `docs/pamctl.md`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success (diff: no changes)
  1  diff found changes; validate found errors; a wait failed
  2  usage error (bad flags, unreadable -f path, unknown kind, no project,
     bad config file)
  3  the server refused the request (4xx: unauthorized, not found, conflict,
     invalid manifests, illegal transition)
  4  the server could not be reached
  5  the server failed (5xx) or sent an unreadable answer";

/// An error on its way to the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
    /// Extra `error:` lines (one per problem).
    pub details: Vec<String>,
    pub hints: Vec<String>,
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> CliError {
        CliError {
            exit,
            message: message.into(),
            details: Vec::new(),
            hints: Vec::new(),
            status: None,
        }
    }

    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Usage, message)
    }

    pub fn failed(message: impl Into<String>) -> CliError {
        CliError::new(Exit::Failed, message)
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    pub fn details(mut self, details: Vec<String>) -> CliError {
        self.details = details;
        self
    }

    /// The lines printed on stderr, without colour.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !self.message.is_empty() {
            out.push(("error", self.message.clone()));
        }
        out.extend(self.details.iter().map(|d| ("error", d.clone())));
        out.extend(self.hints.iter().map(|h| ("hint", h.clone())));
        out
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (label, text)) in self.lines().iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{label}: {text}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CliError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_documented_numbers() {
        assert_eq!(Exit::Ok as u8, 0);
        assert_eq!(Exit::Failed as u8, 1);
        assert_eq!(Exit::Usage as u8, 2);
        assert_eq!(Exit::Refused as u8, 3);
        assert_eq!(Exit::Unreachable as u8, 4);
        assert_eq!(Exit::ServerError as u8, 5);
        for n in 0..=5 {
            assert!(
                EXIT_CODES_HELP.contains(&format!("  {n}  ")),
                "{n} undocumented"
            );
        }
    }

    #[test]
    fn display_puts_details_then_hints() {
        let e = CliError::new(Exit::Refused, "apply refused")
            .details(vec!["a.yaml: document 0: bad".into()])
            .hint("fix it");
        assert_eq!(
            e.to_string(),
            "error: apply refused\nerror: a.yaml: document 0: bad\nhint: fix it"
        );
    }
}
