//! Why a spawn failed is not only in the worker's log. A run
//! whose cwd does not exist on the host fails `spawn_failed`, and the
//! worker's words reach the run's `status.message`, its `run.failed`
//! event and `pamctl describe`.

use std::path::Path;
use std::time::Duration;

use pam_tests::ok;
use pam_tests::worker::{
    apply, fake, fast_pamd, project_yaml, run_events, run_yaml, wait_online, wait_phase, Worker,
};

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_spawn_failure_says_why_in_status_event_and_describe() {
    let pamd = fast_pamd().await;
    let _w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let missing = Path::new("/nonexistent/pam-spawn-failure");
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("bad-cwd", missing, &fake(&["--lines", "1"]), "")
        ),
    );
    let r = wait_phase(&pamd, "bad-cwd", "failed", T).await;
    let want = "run cwd /nonexistent/pam-spawn-failure is not a directory on this host";
    assert_eq!(r["status"]["failureReason"], "spawn_failed", "{r}");
    assert!(
        r["status"]["message"].as_str().unwrap_or("").contains(want),
        "{r}"
    );

    let id = r["metadata"]["uid"].as_str().unwrap().to_string();
    let failed: Vec<_> = run_events(&pamd, &id)
        .await
        .into_iter()
        .filter(|e| e["topic"] == "run.failed")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(
        failed[0]["payload"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(want),
        "{failed:#?}"
    );

    let described = ok(&pamd.pamctl(&["-p", "e2e", "describe", "run", "bad-cwd"]));
    assert!(described.contains(want), "{described}");
}
