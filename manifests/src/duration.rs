//! Durations as Go (and so kubectl) writes them: `500ms`, `30s`, `1m30s`,
//! `1h5m`, `1.5h`, `2h45m0.5s`. Units: `ns`, `us` (`µs`), `ms`, `s`, `m`,
//! `h`; `0` is zero. The one parser for a Source's `spec.interval` and
//! every pamctl flag that takes a duration (pamctl adds bare seconds on
//! top, see its `duration` module).

use std::time::Duration;

/// Parses a Go duration; `None` when `text` is not one. Negative durations
/// are refused: every duration pam reads means "how long", never "how long
/// ago".
pub fn parse(text: &str) -> Option<Duration> {
    let t = text.trim();
    if t == "0" {
        return Some(Duration::ZERO);
    }
    if t.is_empty() || t.starts_with('-') {
        return None;
    }
    let mut rest = t.strip_prefix('+').unwrap_or(t);
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
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
            _ => return None,
        };
        total += n * seconds_per;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
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
            ("1m", ms(60_000)),
            ("1m30s", ms(90_000)),
            ("1h5m", ms(3_900_000)),
            ("1.5h", ms(5_400_000)),
            ("2h45m0.5s", ms(9_900_500)),
            ("1m0s", ms(60_000)),
            ("1500us", ms(1)), /* 1.5 ms, truncated below */
            ("0", ms(0)),
            ("+5m", ms(300_000)),
        ] {
            let got = parse(text).unwrap();
            assert_eq!(got.as_millis(), want.as_millis(), "{text}");
        }
        assert_eq!(parse("10ns"), Some(Duration::from_nanos(10)));
    }

    #[test]
    fn bad_forms() {
        for bad in [
            "", "+", "-5s", "-1s", "5x", "m", "1h-5m", "1m-", "s5", "1..5s", "5 s", "1d", "45",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
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
