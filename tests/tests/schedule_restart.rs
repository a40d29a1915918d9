//! Schedules across a pamd crash, on a real pamd process: a Schedule
//! every minute with a moved clock (`pamd --clock-file`, clock.rs `FileClock`)
//! gets exactly one run per tick; pamd SIGKILLed between ticks and restarted
//! doubles no tick; a tick missed while pamd was down is caught up once within
//! `startingDeadlineSeconds` and skipped after it (rules/schedules.rs). Runs
//! stay pending: no worker is needed. And a pamd with `--local-worker` keeps
//! leading and running runs on its host after its clock jumps minutes ahead.
//!
//! "No double" is checked after two more passes of the schedule loop
//! (`pam_loop_duration_seconds_count{loop="schedule"}`): the second began
//! after the check started, so it saw the file's time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use pam_tests::worker::{
    apply, events, fake, project_yaml, run_yaml, wait_phase, FAST_PAMD_TOML, FAST_WORKER_TOML,
};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::Value;

const T: Duration = Duration::from_secs(20);

/// Loop passes every 200 ms; rate limits off (with the clock standing
/// still, their buckets would not refill).
const RESYNC: &str = "[loops]\nresync_ms = 200\n[rate_limits]\nenabled = false\n";

/// 2026-01-01T00:MM:SSZ.
fn at(minute: u32, second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, minute, second).unwrap()
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Moves pamd's clock: a whole new file at once (write, then rename), so
/// pamd never reads half a time.
fn set_clock(file: &Path, t: DateTime<Utc>) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{}\n", ts(t))).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// The run a tick creates: `<schedule>-<minutes since the epoch>`.
fn run_of_tick(tick: DateTime<Utc>) -> String {
    format!("every-minute-{}", tick.timestamp().div_euclid(60))
}

const SCHEDULE: &str = "apiVersion: pam.dev/v1\nkind: Schedule\nmetadata:\n  name: every-minute\n  project: e2e\nspec:\n  schedule: \"* * * * *\"\n  timeZone: UTC\n  concurrencyPolicy: Allow\n  startingDeadlineSeconds: 30\n  runTemplate:\n    task: t1\n    provider: claude\n    prompt: tick\n    cwd: /tmp\n";

/// The project's run names, sorted.
async fn runs(pamd: &Pamd) -> Vec<String> {
    let list = pamd.get("/api/v1/projects/e2e/runs").await.unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a run list: {list}"))
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn names(ticks: &[DateTime<Utc>]) -> Vec<String> {
    let mut v: Vec<String> = ticks.iter().map(|t| run_of_tick(*t)).collect();
    v.sort();
    v
}

/// pamd's log says the loops' lease was taken `times` times (once per
/// process) and never lost.
fn took_the_lead(pamd: &Pamd, times: usize) {
    let log = pamd.log();
    assert_eq!(
        log.matches("leading: the loops run here").count(),
        times,
        "{log}"
    );
    assert!(
        !log.contains("lost the lead") && !log.contains("stepping down"),
        "{log}"
    );
}

/// How many passes of the schedule loop this pamd process finished.
async fn schedule_passes(pamd: &Pamd) -> Option<u64> {
    let n = pamd
        .metric("pam_loop_duration_seconds_count{loop=\"schedule\"}")
        .await?;
    Some(n as u64)
}

/// Waits until the schedule loop has run two more passes, then asserts
/// the runs are exactly `ticks`' (none added by those passes).
async fn no_more_runs(pamd: &Pamd, ticks: &[DateTime<Utc>], why: &str) {
    let from = schedule_passes(pamd).await.unwrap_or(0);
    eventually(T, "two more schedule passes", || async {
        (schedule_passes(pamd).await? >= from + 2).then_some(())
    })
    .await;
    assert_eq!(runs(pamd).await, names(ticks), "{why}");
}

/// Waits for the runs to be exactly `ticks`' (one run per tick).
async fn runs_are(pamd: &Pamd, ticks: &[DateTime<Utc>], why: &str) {
    let want = names(ticks);
    let got = eventually(T, why, || async {
        let got = runs(pamd).await;
        (got.len() >= want.len()).then_some(got)
    })
    .await;
    assert_eq!(got, want, "{why}");
}

async fn status(pamd: &Pamd) -> Value {
    pamd.get("/api/v1/projects/e2e/schedules/every-minute")
        .await
        .unwrap()["status"]
        .clone()
}

async fn status_is(pamd: &Pamd, last: Option<DateTime<Utc>>, next: DateTime<Utc>) {
    let s = status(pamd).await;
    assert_eq!(
        s["lastScheduleTime"].as_str().map(str::to_string),
        last.map(ts),
        "{s}"
    );
    assert_eq!(s["nextScheduleTime"], ts(next), "{s}");
}

async fn crash_and_restart(pamd: &mut Pamd, clock: &Path, to: Option<DateTime<Utc>>) {
    pamd.kill9();
    if let Some(t) = to {
        set_clock(clock, t);
    }
    pamd.start_again().await.unwrap();
}

#[tokio::test]
async fn a_moved_clock_and_sigkill_between_ticks_double_no_tick() {
    let dir = tempfile::tempdir().unwrap();
    let clock: PathBuf = dir.path().join("now");
    set_clock(&clock, at(0, 30));
    let mut pamd = Pamd::start(PamdOptions {
        // Passes every 200 ms; runs stay pending through the test's 5
        // minutes; with the clock standing still, rate-limit buckets would
        // not refill.
        config_toml: format!("{RESYNC}[dispatch]\ntimeout_seconds = 3600\n"),
        args: vec!["--clock-file".into(), clock.display().to_string()],
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    assert!(pamd.log().contains("--clock-file"), "{}", pamd.log());
    apply(&pamd, &format!("{}---\n{SCHEDULE}", project_yaml()));
    // Created at 00:00:30 by pamd's clock: the first tick is 00:01.
    status_is(&pamd, None, at(1, 0)).await;
    no_more_runs(&pamd, &[], "no tick before 00:01").await;

    // One run per tick, and no double on later passes.
    let mut ticks = vec![at(1, 0)];
    set_clock(&clock, at(1, 30));
    runs_are(&pamd, &ticks, "the 00:01 run").await;
    no_more_runs(&pamd, &ticks, "00:01 once").await;
    status_is(&pamd, Some(at(1, 0)), at(2, 0)).await;

    // SIGKILL right after a tick's run, restart on the same clock: the
    // tick is not taken again.
    crash_and_restart(&mut pamd, &clock, None).await;
    no_more_runs(&pamd, &ticks, "00:01 once after a SIGKILL").await;

    ticks.push(at(2, 0));
    set_clock(&clock, at(2, 30));
    runs_are(&pamd, &ticks, "the 00:02 run").await;
    crash_and_restart(&mut pamd, &clock, None).await;
    no_more_runs(&pamd, &ticks, "00:02 once after a SIGKILL").await;
    status_is(&pamd, Some(at(2, 0)), at(3, 0)).await;

    // Down over 00:03, back 20 s late (inside the 30 s deadline): caught
    // up, once.
    ticks.push(at(3, 0));
    crash_and_restart(&mut pamd, &clock, Some(at(3, 20))).await;
    runs_are(&pamd, &ticks, "the missed 00:03 run, caught up").await;
    no_more_runs(&pamd, &ticks, "00:03 caught up once").await;
    status_is(&pamd, Some(at(3, 0)), at(4, 0)).await;

    // Down over 00:04, back 45 s late (past the deadline): no run; the
    // tick is taken as missed (its event), and the next one is 00:05.
    crash_and_restart(&mut pamd, &clock, Some(at(4, 45))).await;
    let missed = eventually(T, "schedule.tick_missed for 00:04", || async {
        let e = events(&pamd, Some("schedule.tick_missed")).await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert_eq!(missed[0]["payload"]["scheduled_at"], ts(at(4, 0)));
    assert_eq!(missed[0]["payload"]["starting_deadline_seconds"], 30);
    no_more_runs(&pamd, &ticks, "00:04 past its deadline: no run").await;
    status_is(&pamd, Some(at(4, 0)), at(5, 0)).await;

    ticks.push(at(5, 0));
    set_clock(&clock, at(5, 10));
    runs_are(&pamd, &ticks, "the 00:05 run").await;
    no_more_runs(&pamd, &ticks, "00:05 once").await;

    // pamctl shows the same status; one schedule.run_created per run.
    let json: Value = serde_json::from_str(&ok(&pamd.pamctl(&[
        "get",
        "schedule",
        "every-minute",
        "-p",
        "e2e",
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["status"]["lastScheduleTime"], ts(at(5, 0)), "{json}");
    assert_eq!(json["status"]["nextScheduleTime"], ts(at(6, 0)), "{json}");
    // Minutes of jumps past the 15 s lease: the one replica kept (or at
    // a restart retook) the lead every time.
    took_the_lead(&pamd, 5);
    let created = events(&pamd, Some("schedule.run_created")).await;
    let mut at_ticks: Vec<String> = created
        .iter()
        .map(|e| e["payload"]["scheduled_at"].as_str().unwrap().to_string())
        .collect();
    at_ticks.sort();
    assert_eq!(
        at_ticks,
        ticks.iter().map(|t| ts(*t)).collect::<Vec<_>>(),
        "{created:?}"
    );
}

/// A jump of ten minutes is ten minutes of silence by pamd's clock: the
/// local worker's host may go offline for it, and its next heartbeat (1 s
/// here) brings it back online at the new time; the one replica keeps the
/// lead, and a run applied after the jump runs to its end on the host.
#[tokio::test]
async fn a_local_worker_and_the_lease_survive_a_jump_of_minutes() {
    let dir = tempfile::Builder::new().prefix("pamclk").tempdir().unwrap();
    let clock = dir.path().join("now");
    set_clock(&clock, at(0, 30));
    let socket = dir.path().join("tmux.sock");
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!("{FAST_PAMD_TOML}{RESYNC}"),
        args: vec![
            "--local-worker".into(),
            "--clock-file".into(),
            clock.display().to_string(),
        ],
        // pamd's clock stands still at the file's time here, so its
        // timeout sweep never finds a run unclaimed for 2 s and never
        // wakes the claims again (pamd's own safety net for a lost
        // wake-up); the worker's resync is the one left, as it was when
        // its default was 60 s (seen once in CI: the run unclaimed for
        // 60 s with the 300 s default).
        worker_toml: Some(format!(
            "tmux_socket = {:?}\n{FAST_WORKER_TOML}resync_seconds = 5\n",
            socket.display().to_string(),
        )),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let online_since = |since: DateTime<Utc>| {
        let pamd = &pamd;
        async move {
            let hosts = pamd.get("/api/v1/hosts").await.ok()?;
            let h = hosts["items"].as_array()?.first()?.clone();
            let seen: DateTime<Utc> = h["status"]["lastSeenAt"].as_str()?.parse().ok()?;
            (h["status"]["phase"] == "online" && seen >= since)
                .then(|| h["metadata"]["name"].as_str().unwrap().to_string())
        }
    };
    let host = eventually(T, "the local host online", || online_since(at(0, 30))).await;

    set_clock(&clock, at(10, 30));
    let again = eventually(T, "the local host online at the new time", || {
        online_since(at(10, 30))
    })
    .await;
    assert_eq!(again, host);
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("after-jump", dir.path(), &fake(&["--lines", "1"]), "")
        ),
    );
    let r = wait_phase(&pamd, "after-jump", "exited", Duration::from_secs(60)).await;
    assert_eq!(r["status"]["host"], host.as_str(), "{r}");
    assert_eq!(r["status"]["exitCode"], 0, "{r}");
    let created: DateTime<Utc> = r["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(created, at(10, 30), "pamd's time is the file's: {r}");
    took_the_lead(&pamd, 1);
}
