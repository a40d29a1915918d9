//! Schedules end to end: a Schedule applied with pamctl shows its NEXT tick
//! in `pamctl get schedules`, `pamctl schedule trigger` starts a run that a
//! real worker runs to the end (LAST-RESULT), and bad timetables are
//! refused with file:line before anything is written.

use std::time::Duration;

use pam_tests::worker::{
    apply, claude_command, create_worker_token, fake, fast_pamd, project_yaml, wait_online,
    wait_phase, Worker, FAST_WORKER_TOML,
};
use pam_tests::{eventually, fails, ok};

const T: Duration = Duration::from_secs(30);

fn schedule_yaml(name: &str, cron: &str, zone: &str, cwd: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Schedule\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  schedule: {cron:?}\n  timeZone: {zone}\n  concurrencyPolicy: Forbid\n  runTemplate:\n    task: t1\n    provider: claude\n    prompt: nightly\n    cwd: {cwd:?}\n"
    )
}

#[tokio::test]
async fn get_schedules_trigger_and_bad_timetables() {
    let pamd = fast_pamd().await;
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let toml = format!(
        "{FAST_WORKER_TOML}{}",
        claude_command(&fake(&["--lines", "1"]))
    );
    let w = Worker::start_with_token(&pamd.url, &token, "h1", &toml).unwrap();
    wait_online(&pamd, "h1").await;
    let cwd = w.tmp().display().to_string();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            schedule_yaml("yearly", "@yearly", "Europe/Berlin", &cwd)
        ),
    );
    let table = ok(&pamd.pamctl(&["get", "schedules", "-p", "e2e"]));
    let header = table.lines().next().unwrap();
    for col in [
        "NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "NEXT", "AGE",
    ] {
        assert!(header.contains(col), "{table}");
    }
    // Next New Year in Berlin is 23:00 UTC on 31 December.
    assert!(table.contains("-12-31T23:00:00Z"), "{table}");

    let run = ok(&pamd.pamctl(&["schedule", "trigger", "yearly", "-p", "e2e"]));
    let run = run.trim().to_string();
    assert!(run.starts_with("yearly-"), "{run}");
    wait_phase(&pamd, &run, "exited", T).await;
    let wide = eventually(T, "the last result", || async {
        let t = ok(&pamd.pamctl(&["get", "schedules", "-A", "-o", "wide"]));
        t.contains(&format!("{run}: exited (exit 0)")).then_some(t)
    })
    .await;
    assert!(
        wide.contains("Forbid") && wide.contains("Europe/Berlin"),
        "{wide}"
    );

    // A malformed cron and an unknown zone: file:line, nothing written.
    let bad = format!(
        "{}---\n{}",
        schedule_yaml("bad-cron", "every day", "UTC", &cwd),
        schedule_yaml("bad-zone", "@daily", "Mars/Olympus", &cwd)
    );
    let err = fails(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&bad)), 3);
    assert!(
        err.contains("line 7") && err.contains("spec.schedule"),
        "{err}"
    );
    assert!(
        err.contains("line 23") && err.contains("spec.timeZone"),
        "{err}"
    );
    let names = ok(&pamd.pamctl(&["get", "schedules", "-p", "e2e", "-o", "name"]));
    assert_eq!(names.trim(), "schedule/yearly", "{names}");
}
