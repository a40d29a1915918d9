//! Durations as Go (and so kubectl) writes them: `500ms`, `30s`, `1m30s`,
//! `1h5m`, `1.5h`, `2h45m0.5s`. Units: `ns`, `us` (`µs`), `ms`, `s`, `m`,
//! `h`. A bare number is seconds (pamctl accepted that before it spoke
//! Go's syntax, and scripts may rely on it); `0` is zero.

use std::time::Duration;

use crate::error::{CliError, Result};

/// Parses a Go-style duration (module doc). Negative durations are refused:
/// every pamctl flag that takes one means "how long", never "how long ago".
pub fn parse(text: &str) -> Result<Duration> {
    let bad = || {
        CliError::usage(format!(
            "bad duration {text:?}: expected e.g. 500ms, 30s, 1m30s, 2h"
        ))
    };
    let t = text.trim();
    if t.is_empty() || t.starts_with('-') {
        return Err(bad());
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = t.parse().map_err(|_| bad())?;
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    let mut rest = t;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        if num_end == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += n * seconds_per;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// Prints a duration the way Go does (`1m30s`, `500ms`, `2h0m0s` → `2h`):
/// hours, minutes and seconds, dropping zero parts; under a second, in
/// milliseconds.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m) = (ms / 3_600_000, (ms / 60_000) % 60);
    let s_ms = ms % 60_000;
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s_ms > 0 {
        if s_ms.is_multiple_of(1000) {
            out.push_str(&format!("{}s", s_ms / 1000));
        } else {
            let frac = format!("{:03}", s_ms % 1000);
            out.push_str(&format!("{}.{}s", s_ms / 1000, frac.trim_end_matches('0')));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms() {
        let ms = |n: u64| Duration::from_millis(n);
        for (text, want) in [
            ("500ms", ms(500)),
            ("30s", ms(30_000)),
            ("1m30s", ms(90_000)),
            ("1h5m", ms(3_900_000)),
            ("1.5h", ms(5_400_000)),
            ("2h45m0.5s", ms(9_900_500)),
            ("1m0s", ms(60_000)),
            ("1500us", ms(1)), /* 1.5 ms, truncated below */
            ("0", ms(0)),
            ("45", ms(45_000)),
            ("2.5", ms(2_500)),
            ("+5m", ms(300_000)),
        ] {
            let got = parse(text).unwrap();
            assert_eq!(got.as_millis(), want.as_millis(), "{text}");
        }
        assert_eq!(parse("10ns").unwrap(), Duration::from_nanos(10));
    }

    #[test]
    fn bad_forms_are_usage_errors() {
        for bad in ["", "-5s", "5x", "m", "1h-5m", "s5", "1..5s", "5 s", "1d"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage, "{bad}");
            assert!(e.message.contains("expected e.g. 500ms"), "{bad}");
        }
    }

    #[test]
    fn formats_like_go() {
        let ms = |n: u64| format(Duration::from_millis(n));
        assert_eq!(ms(0), "0s");
        assert_eq!(ms(500), "500ms");
        assert_eq!(ms(30_000), "30s");
        assert_eq!(ms(90_000), "1m30s");
        assert_eq!(ms(7_200_000), "2h");
        assert_eq!(ms(3_900_000), "1h5m");
        assert_eq!(ms(1_500), "1.5s");
        assert_eq!(ms(61_250), "1m1.25s");
    }
}
