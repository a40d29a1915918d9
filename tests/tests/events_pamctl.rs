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
    // once instead of running out its timeout.
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
    work_r1(&p, false).await;

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

/// A worker's side through its API (host box-a): claims r1, starts it,
/// ships one output snapshot (3 lines, 6 bytes) when asked, and exits 0.
async fn work_r1(p: &Pamd, snapshot: bool) {
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
        ("snapshot", json!({})),
        ("finished", json!({"exit_code": 0})),
    ] {
        let r = if kind == "snapshot" {
            if !snapshot {
                continue;
            }
            let snap = json!({"run_id": run_id, "attempt": 1, "text": "a\nb\nc\n", "lines": 3, "bytes": 6});
            post("/api/v1/workers/snapshots", snap).await.unwrap()
        } else {
            let mut sig =
                json!({"run_id": run_id, "attempt": 1, "kind": kind, "at": "2026-03-01T12:00:00Z"});
            sig.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            post("/api/v1/workers/signals", json!({"signals": [sig]}))
                .await
                .unwrap()
        };
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
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

/// Events read as sentences in `pamctl events`, `get events`
/// (`--for`, `--types`, `-o json`, `-w`) and `describe`; output
/// snapshots hidden unless asked.
#[tokio::test]
async fn events_read_as_sentences_in_events_get_events_and_describe() {
    let p = started().await;
    work_r1(&p, true).await;

    // `events`: SEQ TIME TYPE REASON OBJECT MESSAGE, no JSON, no output.
    let out = ok(&p.pamctl(&["events"]));
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    let row = |topic: &str| -> Vec<&str> {
        rows.iter()
            .find(|r| r[2] == topic)
            .unwrap_or_else(|| panic!("no {topic} in\n{out}"))[2..]
            .to_vec()
    };
    assert_eq!(
        row("run.created"),
        [
            "run.created",
            "Created",
            "run/r1",
            "run r1 created for task cart (provider claude)"
        ]
    );
    assert_eq!(
        row("run.finished"),
        [
            "run.finished",
            "Completed",
            "run/r1",
            "run r1 exited with code 0 (attempt 1 of 1)"
        ]
    );
    assert_eq!(
        row("worker.registered"),
        [
            "worker.registered",
            "Online",
            "host/box-a",
            "host box-a is online (was registered)"
        ]
    );
    assert!(rows.iter().all(|r| r.len() == 6), "{out}");
    assert!(!out.contains('{'), "no JSON: {out}");
    assert!(!out.contains("run.output_appended"), "{out}");
    let shown = ok(&p.pamctl(&["events", "--show-output", "--for", "rn/r1"]));
    let output: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("\trun.output_appended\t"))
        .collect();
    assert_eq!(output.len(), 1, "{shown}");
    assert!(
        output[0].ends_with("\tOutput\trun/r1\trun r1 output: 3 lines, 6 bytes (attempt 1 of 1)"),
        "{shown}"
    );
    assert!(shown.lines().all(|l| l.contains("\trun/r1\t")), "{shown}");

    // `get events`: kubectl's table, --for, --types, -o json.
    let table = ok(&p.pamctl(&["get", "events", "--for", "run/r1"]));
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{table}"
    );
    let body: Vec<&str> = lines.collect();
    assert!(body.len() >= 4, "{table}");
    assert!(body.iter().all(|l| l.contains(" run/r1 ")), "{table}");
    assert!(
        body.iter().any(|l| l.contains("run.spawning")
            && l.contains("Scheduled")
            && l.contains("run r1 dispatched to host box-a as session pam-")),
        "{table}"
    );
    assert!(!table.contains("run.output_appended"), "{table}");
    let json_out = ok(&p.pamctl(&["get", "ev", "--types", "run.output_appended", "-o", "json"]));
    let v: Value = serde_json::from_str(&json_out).unwrap();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{json_out}");
    assert_eq!(items[0]["reason"], "Output");
    assert_eq!(items[0]["object"], "run/r1");
    assert_eq!(items[0]["payload"]["lines"], 3, "the payload stays");
    let bad = p.pamctl(&["get", "events", "r1"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = p.pamctl(&["get", "events", "--for", "nope/r1"]);
    assert_eq!(bad.status.code(), Some(2));

    // describe's Events: the same words.
    let d = ok(&p.pamctl(&["-p", "web", "describe", "run", "r1"]));
    let events = d.split("Events:\n").nth(1).unwrap();
    assert!(
        events.contains("TYPE") && events.contains("REASON") && events.contains("MESSAGE"),
        "{d}"
    );
    assert!(
        events.contains("Completed") && events.contains("run r1 exited with code 0"),
        "{d}"
    );
    assert!(!events.contains('{'), "{d}");

    // -w: the list, then each new event about the object as a row.
    let w = p.pamctl_background(&["get", "events", "-w", "--for", "task/cart"]);
    wait_subscribers(&p, 1).await;
    ok(&p.pamctl(&["-p", "web", "task", "start", "cart"]));
    let mut seen = Vec::new();
    loop {
        let line = w.line(Duration::from_secs(20));
        if line.contains("StatusChanged") {
            assert!(
                line.contains("task cart moved from todo to doing"),
                "{line}"
            );
            break;
        }
        seen.push(line);
    }
    assert!(
        seen.iter()
            .any(|l| l.contains("task cart created in project web")),
        "{seen:?}"
    );
}
