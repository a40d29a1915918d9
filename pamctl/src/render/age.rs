//! Ages as kubectl prints them (`5m`, `3h`, `2d4h`): the same steps as
//! kubectl's `HumanDuration`.

use chrono::{DateTime, Utc};

/// kubectl's `HumanDuration` of `seconds`.
pub fn human(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let d = (hours / 24) % 365;
        let y = hours / 24 / 365;
        return if d == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{d}d")
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 timestamp at `now`; `<unknown>` when absent or
/// unreadable.
pub fn since(timestamp: Option<&str>, now: DateTime<Utc>) -> String {
    match timestamp.and_then(|t| DateTime::parse_from_rfc3339(t).ok()) {
        Some(t) => human((now - t.with_timezone(&Utc)).num_seconds()),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_steps() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human(secs), want, "{secs}s");
        }
    }

    #[test]
    fn since_parses_rfc3339() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(since(Some("2026-01-01T11:55:00Z"), now), "5m");
        assert_eq!(since(Some("2026-01-01T13:00:00+02:00"), now), "60m");
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(since(Some("yesterday"), now), "<unknown>");
    }
}
