//! The `Schedule` kind: runs started on a cron timetable, like
//! a Kubernetes CronJob. pamd's schedule loop creates exactly one Run per
//! tick from `runTemplate`; [`Timetable`] is the one reading of
//! `schedule` and `timeZone`.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use super::*;

/// What a tick does while a run of the schedule is still active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Start the new run anyway.
    #[default]
    Allow,
    /// Skip the tick.
    Forbid,
    /// Stop the active runs, then start the new one.
    Replace,
}

fn default_time_zone() -> String {
    "UTC".into()
}
fn default_successful_limit() -> u32 {
    3
}
fn default_failed_limit() -> u32 {
    1
}

/// The label every run of a Schedule carries: the Schedule's name.
pub const SCHEDULE_LABEL: &str = "schedule.pam.dev/name";

/// Desired state of a Schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Five cron fields (minute hour day-of-month month day-of-week), or
    /// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    pub schedule: String,
    /// The IANA time zone the fields are read in (`Europe/Berlin`).
    #[serde(default = "default_time_zone")]
    pub time_zone: String,
    /// The spec of each Run a tick creates (its task in the Schedule's
    /// project).
    pub run_template: RunSpec,
    /// Allow | Forbid | Replace, while a run of this schedule is active.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// A tick missed (pamd down) by more than this is skipped; absent:
    /// caught up however late (only the latest missed tick, once).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "bounded::opt_u32_i32"
    )]
    #[schemars(range(max = 2147483647))]
    pub starting_deadline_seconds: Option<u32>,
    /// No ticks while true (ticks passing meanwhile are not caught up).
    #[serde(default, skip_serializing_if = "is_false")]
    pub suspend: bool,
    /// Finished runs that succeeded (exit 0) kept; older ones are deleted.
    #[serde(
        default = "default_successful_limit",
        deserialize_with = "bounded::u32_i32"
    )]
    #[schemars(range(max = 2147483647))]
    pub successful_runs_history_limit: u32,
    /// Finished runs that did not succeed kept; older ones are deleted.
    #[serde(
        default = "default_failed_limit",
        deserialize_with = "bounded::u32_i32"
    )]
    #[schemars(range(max = 2147483647))]
    pub failed_runs_history_limit: u32,
}

/// Observed state of a Schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedSchedule {
    /// RFC 3339: the last tick taken (a run created, or skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// RFC 3339: the next tick (absent while suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
    /// Runs of this schedule not finished yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// The newest finished run: `NAME: phase` (and exit code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result: Option<String>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Ticks looked at when catching up, at most: beyond that (a minute
/// schedule missed for ~70 days) the latest tick is not searched further.
const CATCH_UP_MAX_TICKS: u64 = 100_000;

/// A parsed `schedule` in its `timeZone`.
#[derive(Debug, Clone)]
pub struct Timetable {
    cron: Cron,
    tz: Tz,
}

impl Timetable {
    /// Parses `schedule` and `timeZone`; the error says which and why.
    pub fn parse(schedule: &str, time_zone: &str) -> Result<Timetable, (String, String)> {
        let fields = schedule.split_whitespace().count();
        if !schedule.trim_start().starts_with('@') && fields != 5 {
            return Err((
                "spec.schedule".into(),
                format!("{fields} fields in {schedule:?}, expected 5 cron fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly"),
            ));
        }
        let cron = Cron::new(schedule).parse().map_err(|e| {
            let message = match bad_field(schedule) {
                Some((field, value, expected)) => format!(
                    "invalid cron expression {schedule:?}: its {field} field {value:?} is not valid, expected {expected} (a value, a range a-b, a list a,b or a step */n)"
                ),
                None => format!("invalid cron expression {schedule:?} ({e}), expected 5 cron fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly"),
            };
            ("spec.schedule".to_string(), message)
        })?;
        let tz: Tz = time_zone.parse().map_err(|_| {
            (
                "spec.timeZone".to_string(),
                format!("unknown time zone {time_zone:?}, expected an IANA time zone name such as UTC or Europe/Berlin"),
            )
        })?;
        Ok(Timetable { cron, tz })
    }

    /// The first tick strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.with_timezone(&self.tz), false)
            .ok()
            .map(|n| n.with_timezone(&Utc))
    }

    /// The latest tick in `(after, now]` and how many ticks that span
    /// holds (counting stops at a large bound); `None` when there is none.
    pub fn latest_between(
        &self,
        after: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, u64)> {
        let mut latest = None;
        let mut n = 0;
        let mut t = after;
        while let Some(next) = self.next_after(t) {
            if next > now || n >= CATCH_UP_MAX_TICKS {
                break;
            }
            latest = Some(next);
            n += 1;
            t = next;
        }
        latest.map(|l| (l, n))
    }
}

/// Of a five-field expression the parser refused, the first field that
/// is refused on its own (every other field `*`): its name, its text and
/// what it may hold.
fn bad_field(schedule: &str) -> Option<(&'static str, String, &'static str)> {
    const FIELDS: [(&str, &str); 5] = [
        ("minute", "0-59"),
        ("hour", "0-23"),
        ("day-of-month", "1-31"),
        ("month", "1-12 or JAN-DEC"),
        ("day-of-week", "0-7 or SUN-SAT"),
    ];
    let parts: Vec<&str> = schedule.split_whitespace().collect();
    if parts.len() != 5 {
        return None;
    }
    (0..5).find_map(|i| {
        let alone: Vec<&str> = (0..5)
            .map(|j| if j == i { parts[i] } else { "*" })
            .collect();
        Cron::new(&alone.join(" "))
            .parse()
            .is_err()
            .then(|| (FIELDS[i].0, parts[i].to_string(), FIELDS[i].1))
    })
}

impl ScheduleSpec {
    /// The timetable of this spec.
    pub fn timetable(&self) -> Result<Timetable, (String, String)> {
        Timetable::parse(&self.schedule, &self.time_zone)
    }

    /// Problems as (field path, message): the timetable, the template's
    /// environment (its Secrets in the Schedule's project).
    pub fn problems(&self, project: &Name) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Err(p) = self.timetable() {
            out.push(p);
        }
        if self.run_template.stopped {
            out.push((
                "spec.runTemplate.stopped".into(),
                "a template of stopped runs, expected false or no stopped (suspend the Schedule instead)".into(),
            ));
        }
        for (path, message) in self.run_template.env_problems(project) {
            out.push((path.replacen("spec.", "spec.runTemplate.", 1), message));
        }
        out
    }
}

#[cfg(test)]
mod schedule_tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_bad_field_is_named_with_what_it_may_hold() {
        for (expr, field, value, expected) in [
            ("61 * * * *", "minute", "61", "0-59"),
            ("0 24 * * *", "hour", "24", "0-23"),
            ("0 0 32 * *", "day-of-month", "32", "1-31"),
            ("0 0 * 13 *", "month", "13", "1-12"),
            ("0 0 * * 9", "day-of-week", "9", "0-7"),
        ] {
            let (path, m) = Timetable::parse(expr, "UTC").err().unwrap();
            assert_eq!(path, "spec.schedule");
            assert!(
                m.contains(&format!(
                    "its {field} field {value:?} is not valid, expected {expected}"
                )),
                "{expr}: {m}"
            );
            assert!(!m.contains("Component error"), "{m}");
        }
    }

    #[test]
    fn cron_zones_and_catch_up() {
        let t = Timetable::parse("*/15 * * * *", "UTC").unwrap();
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 10, 7, 0).unwrap();
        assert_eq!(
            t.next_after(at),
            Some(Utc.with_ymd_and_hms(2026, 1, 1, 10, 15, 0).unwrap())
        );
        let (latest, n) = t
            .latest_between(at, Utc.with_ymd_and_hms(2026, 1, 1, 11, 0, 0).unwrap())
            .unwrap();
        assert_eq!(
            (latest.to_rfc3339(), n),
            ("2026-01-01T11:00:00+00:00".into(), 4)
        );
        // 09:00 in Berlin is 08:00 UTC in winter.
        let b = Timetable::parse("0 9 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            b.next_after(at),
            Some(Utc.with_ymd_and_hms(2026, 1, 2, 8, 0, 0).unwrap())
        );
        assert!(Timetable::parse("@hourly", "UTC").is_ok());
        assert_eq!(
            Timetable::parse("* * *", "UTC").unwrap_err().0,
            "spec.schedule"
        );
        assert_eq!(
            Timetable::parse("61 * * * *", "UTC").unwrap_err().0,
            "spec.schedule"
        );
        assert_eq!(
            Timetable::parse("* * * * *", "Mars/Base").unwrap_err().0,
            "spec.timeZone"
        );
    }
}
