//! The event stream end to end: real pamd, real pamctl (`wait`, `get -w`,
//! `events -f`), and pamd's shutdown with streams open.

use std::time::Duration;

use pam_tests::{eventually, ok, Pamd};
use serde_json::{json, Value};

const TREE: &str = "\
apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {displayName: Web}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: web, labels: {team: pay}}
spec: {title: Cart}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: r1, project: web}
spec: {task: cart, provider: claude, prompt: hi, cwd: /tmp}
";

async fn started() -> Pamd {
    let p = Pamd::start(Default::default()).await.unwrap();
    ok(&p.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    p
}

/// Open event streams, from pamd's own metrics.
async fn subscribers(p: &Pamd) -> i64 {
    let text = reqwest::get(format!("{}/metrics", p.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("pam_sse_subscribers "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

async fn wait_subscribers(p: &Pamd, n: i64) {
    eventually(Duration::from_secs(20), "the stream to connect", || async {
        (subscribers(p).await == n).then_some(())
    })
    .await;
}

#[tokio::test]
async fn wait_exits_0_when_the_condition_comes_true_and_1_on_timeout() {
    let p = started().await;
    // Not yet true: it waits on the stream…
    let w = p.pamctl_background(&[
        "-p",
        "web",
        "wait",
        "run/r1",
        "--for=phase=stopped",
        "--timeout",
        "60s",
    ]);
    wait_subscribers(&p, 1).await;
    assert!(w.lines.try_recv().is_err(), "wait finished too early");
    // …until the run is stopped.
    ok(&p.pamctl(&["-p", "web", "stop", "r1"]));
    assert_eq!(
        w.line(Duration::from_secs(20)),
        "run.pam.dev/r1 condition met"
    );
    let (status, _) = w.exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));

    // Not true in time: exit 1 and a message naming the object and its state.
    let out = p.pamctl(&[
        "-p",
        "web",
        "wait",
        "task/cart",
        "--for=phase=done",
        "--timeout",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("timed out after 1s"), "{err}");
    assert!(
        err.contains("task.pam.dev/cart: phase is \"todo\""),
        "{err}"
    );
    // Never true: a stopped run will not run again, so the wait ends at
    // once (issue 16) instead of running out its timeout.
    let out = p.pamctl(&[
        "-p",
        "web",
        "wait",
        "run/r1",
        "--for=phase=running",
        "--timeout",
        "60s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("run.pam.dev/r1 ended in phase \"stopped\""),
        "{err}"
    );

    // Several objects by selector, and delete.
    let w = p.pamctl_background(&[
        "-p",
        "web",
        "wait",
        "tasks",
        "-l",
        "team=pay",
        "--for=delete",
        "--timeout",
        "60s",
    ]);
    wait_subscribers(&p, 1).await;
    ok(&p.pamctl(&["-p", "web", "delete", "run", "r1"]));
    ok(&p.pamctl(&["-p", "web", "delete", "task", "cart"]));
    assert_eq!(w.line(Duration::from_secs(20)), "task.pam.dev/cart deleted");
    let (status, err) = w.exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{err}");
}

#[tokio::test]
async fn get_watch_shows_a_run_moving_through_its_phases() {
    let p = started().await;
    let watch = p.pamctl_background(&["-p", "web", "get", "runs", "-w", "-o", "json"]);
    let events = p.pamctl_background(&["events", "-f", "--topic", "run.", "-p", "web"]);
    let phase = |line: &str| -> String {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["metadata"]["name"], "r1", "{line}");
        v["status"]["phase"].as_str().unwrap().to_string()
    };
    assert_eq!(phase(&watch.line(Duration::from_secs(20))), "pending");
    assert!(events
        .line(Duration::from_secs(20))
        .contains("\trun.created\t"));
    wait_subscribers(&p, 2).await;

    // A worker claims the run, starts it, and it finishes.
    let wt = ok(&p.pamctl(&["token", "create", "--worker", "box-a"]));
    let wt = wt.trim();
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{}{path}", p.url))
            .bearer_auth(wt)
            .json(&body)
            .send()
    };
    let r = post(
        "/api/v1/workers/register",
        json!({"name": "box-a", "platform": "linux", "instance_id": uuid(), "capacity": 2, "labels": {}, "version": "t"}),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let claim: Value = post("/api/v1/workers/claim?wait=0", json!({}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = claim["runs"][0]["run_id"].as_str().unwrap().to_string();
    for (kind, extra) in [
        ("started", json!({})),
        ("finished", json!({"exit_code": 0})),
    ] {
        let mut sig =
            json!({"run_id": run_id, "attempt": 1, "kind": kind, "at": "2026-03-01T12:00:00Z"});
        sig.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = post("/api/v1/workers/signals", json!({"signals": [sig]}))
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    // Every line is a change; the phases arrive in order (a fast pair may
    // be seen as one re-read, but never out of order) and end in exited.
    let order = ["pending", "spawning", "running", "exited"];
    let mut seen = vec!["pending".to_string()];
    while seen.last().map(String::as_str) != Some("exited") {
        let ph = phase(&watch.line(Duration::from_secs(20)));
        let at = |p: &str| order.iter().position(|o| *o == p).unwrap();
        assert!(at(&ph) >= at(seen.last().unwrap()), "{seen:?} then {ph}");
        seen.push(ph);
    }
    seen.dedup();
    assert!(seen.len() >= 3, "too few steps seen: {seen:?}");

    // events -f printed the same story live.
    let mut topics = Vec::new();
    while topics.last().map(String::as_str) != Some("run.finished") {
        let line = events.line(Duration::from_secs(20));
        topics.push(line.split('\t').nth(2).unwrap().to_string());
    }
    let story: Vec<&str> = topics
        .iter()
        .map(String::as_str)
        .filter(|t| ["run.spawning", "run.started", "run.finished"].contains(t))
        .collect();
    assert_eq!(
        story,
        ["run.spawning", "run.started", "run.finished"],
        "{topics:?}"
    );
}

fn uuid() -> String {
    // Good enough for an instance id in a test.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        (t >> 64) as u32,
        t as u64 & 0xffff_ffff_ffff
    )
}

#[tokio::test]
async fn sigterm_with_open_event_streams_exits_within_10s() {
    let mut p = Pamd::start(Default::default()).await.unwrap();
    let http = reqwest::Client::new();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let r = http
            .get(format!("{}/api/v1/events/stream?after=0", p.url))
            .bearer_auth(&p.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        streams.push(r);
    }
    let follower = p.pamctl_background(&["events", "-f"]);
    wait_subscribers(&p, 4).await;
    let status = p.terminate(Duration::from_secs(10)).unwrap();
    assert!(status.success(), "pamd exited with {status}");
    // The open streams ended rather than hanging.
    for mut s in streams {
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(_)) = s.chunk().await {}
        })
        .await;
        assert!(ended.is_ok(), "a stream stayed open after pamd exited");
    }
    drop(follower);
}
