//! pamctl's durations: Go's syntax (the one parser, in
//! `pam_manifests::duration`) plus a bare number as seconds — pamctl
//! accepted that before it spoke Go's syntax, and scripts may rely on it.

use std::time::Duration;

pub use pam_manifests::duration::format;

use crate::error::{CliError, Result};

/// Parses a Go-style duration or a bare number of seconds. Negative
/// durations are refused: every pamctl flag that takes one means "how
/// long", never "how long ago".
pub fn parse(text: &str) -> Result<Duration> {
    let bad = || {
        CliError::usage(format!(
            "bad duration {text:?}: expected e.g. 500ms, 30s, 1m30s, 2h"
        ))
    };
    let t = text.trim();
    let bare = t.strip_prefix('+').unwrap_or(t);
    if !bare.is_empty() && bare.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = bare.parse().map_err(|_| bad())?;
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    pam_manifests::duration::parse(t).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds() {
        assert_eq!(parse("45").unwrap(), Duration::from_secs(45));
        assert_eq!(parse("2.5").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
    }

    #[test]
    fn bad_forms_are_usage_errors() {
        for bad in [
            "", "-5s", "5x", "m", "1h-5m", "s5", "1..5s", "5 s", "1d", "-5",
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage, "{bad}");
            assert!(e.message.contains("expected e.g. 500ms"), "{bad}");
        }
    }
}
