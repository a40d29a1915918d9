//! The seven end-to-end scenarios of issue 5: real pamd on real PostgreSQL,
//! real pam-worker processes (each on a private tmux server), real tmux and
//! the fake provider, with thresholds shortened through pamd's config.

use std::time::Duration;

use pam_tests::worker::{
    apply, events, fake, host, phase, project_yaml, run, run_events, run_yaml, wait_online,
    wait_phase, Worker, FAST_PAMD_TOML,
};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::Value;

const T: Duration = Duration::from_secs(60);

async fn pamd(extra: &str) -> Pamd {
    Pamd::start(PamdOptions {
        config_toml: format!("{FAST_PAMD_TOML}{extra}"),
    })
    .await
    .unwrap()
}

fn topics(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .map(|e| e["topic"].as_str().unwrap_or("").to_string())
        .collect()
}

fn run_id(r: &Value) -> String {
    r["metadata"]["uid"].as_str().unwrap_or_default().to_string()
}

/// Scenario 1: a run reaches `exited` with exit code 0; events in order
/// run.created, run.spawning, run.started, run.finished, each attempt 1;
/// the log file exists.
#[tokio::test]
async fn s1_run_exits_zero_with_ordered_events_and_a_log() {
    let pamd = pamd("").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let cwd = w.tmp().to_path_buf();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("r1", &cwd, &fake(&["--lines", "2"]), "")
        ),
    );
    let r = wait_phase(&pamd, "r1", "exited", T).await;
    assert_eq!(r["status"]["exitCode"], 0, "{r}");
    assert_eq!(r["status"]["attempt"], 1);
    let id = run_id(&r);
    let evs: Vec<Value> = run_events(&pamd, &id)
        .await
        .into_iter()
        .filter(|e| {
            matches!(
                e["topic"].as_str(),
                Some("run.created" | "run.spawning" | "run.started" | "run.finished")
            )
        })
        .collect();
    assert_eq!(
        topics(&evs),
        ["run.created", "run.spawning", "run.started", "run.finished"],
        "{evs:#?}"
    );
    assert!(evs.iter().all(|e| e["payload"]["attempt"] == 1), "{evs:#?}");
    let log = w.run_log(&id, 1);
    assert!(log.exists(), "{} missing; worker log:\n{}", log.display(), w.log());
    assert!(std::fs::read_to_string(&log).unwrap().contains("result"));
}
