//! The event stream (`GET /api/v1/events/stream`), journal paging, publish
//! order and `/metrics`, against real PostgreSQL and the real router served
//! on a loopback socket (docs/api.md, "Event stream (SSE)").

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use pam_controller::api::{router, AppState};
use pam_controller::clock::ManualClock;
use pam_controller::ctx::Ctx;
use pam_controller::events::EventBus;
use pam_store::TokenKind;
use serde_json::{json, Value};
use uuid::Uuid;

struct Server {
    state: AppState,
    base: String,
    token: String,
    clock: Arc<ManualClock>,
    http: reqwest::Client,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(EventBus::default()).await
    }

    async fn start_with(bus: EventBus) -> Server {
        let clock = Arc::new(ManualClock::new(
            Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap(),
        ));
        let mut state = AppState::new(
            std::sync::Arc::new(pam_store::postgres::PgStore::new(
                pam_testkit::testdb::fresh_pool().await.unwrap(),
            )),
            clock.clone(),
            Default::default(),
        );
        state.ctx = Ctx::with_bus(
            state.ctx.store.clone(),
            clock.clone(),
            Default::default(),
            bus,
        );
        let token = make_token(&state).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Server {
            state,
            base,
            token,
            clock,
            http: reqwest::Client::new(),
        }
    }

    fn ctx(&self) -> &Ctx {
        &self.state.ctx
    }

    /// Waits until the journal reader published the event `seq`.
    async fn published_up_to(&self, seq: i64) {
        for _ in 0..2000 {
            if self.ctx().bus.published().seq == seq {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the reader never published {seq}");
    }

    /// Waits until no committed event waits behind a transaction in flight
    /// (the horizon is the shared test cluster's: other tests' transactions
    /// hold it back for a moment).
    async fn settled(&self) {
        for _ in 0..2000 {
            let page = self
                .ctx()
                .store
                .read_journal(pam_store::Position::START, 0)
                .await
                .unwrap();
            if !page.held {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the journal's horizon stayed behind");
    }

    /// Journals `events` in one transaction through the real commit path.
    async fn journal(&self, events: &[(&str, Value)]) -> Vec<i64> {
        let ctx = self.ctx();
        let mut tx = ctx.store.begin().await.unwrap();
        let mut seqs = Vec::new();
        for (topic, payload) in events {
            let e = tx
                .append_event(topic, payload.clone(), ctx.now())
                .await
                .unwrap();
            seqs.push(e.seq);
        }
        ctx.commit(tx).await.unwrap();
        seqs
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(json!(text)))
    }

    /// Applies `yaml` through the router, asserting a 200.
    async fn apply(&self, yaml: &str) {
        let (st, v) = self.state.clone().pipe_apply(yaml).await;
        assert_eq!(st, 200, "{v}");
    }

    /// `path` with no token.
    async fn get_anonymous(&self, path: &str) -> reqwest::Response {
        let url = format!("{}{path}", self.base);
        self.http.get(url).send().await.unwrap()
    }

    async fn stream(&self, query: &str, last_event_id: Option<i64>) -> Sse {
        let mut req = self
            .http
            .get(format!("{}/api/v1/events/stream{query}", self.base))
            .bearer_auth(&self.token);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let position = resp.headers()["x-pam-stream-position"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        Sse {
            resp,
            buf: String::new(),
            position,
        }
    }
}

async fn make_token(state: &AppState) -> String {
    let mut tx = state.ctx.store.begin().await.unwrap();
    let (_, token) = pam_controller::rules::tokens::mint(
        &mut *tx,
        TokenKind::Operator,
        format!("ops-{}", Uuid::new_v4()),
        None,
        Utc::now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    token
}

#[derive(Debug, Clone)]
struct Frame {
    id: Option<i64>,
    event: String,
    data: Value,
}

/// A minimal SSE reader: frames end with a blank line; comment lines
/// (keep-alives) are skipped.
struct Sse {
    resp: reqwest::Response,
    buf: String,
    position: i64,
}

impl Sse {
    /// The next frame, `None` when the stream ended; panics after 20 s of
    /// silence (a test bug, not a wait).
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..end + 2).collect();
                let mut f = Frame {
                    id: None,
                    event: "message".into(),
                    data: Value::Null,
                };
                let mut any = false;
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        f.id = Some(v.parse().unwrap());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        f.event = v.to_string();
                        any = true;
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        f.data = serde_json::from_str(v).unwrap();
                        any = true;
                    }
                }
                if any {
                    return Some(f);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.resp.chunk())
                .await
                .expect("the stream went silent")
                .unwrap()?;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The next frame, which must be `event` at position `id`.
    async fn expect(&mut self, event: &str, id: i64) {
        let f = self.next().await.unwrap();
        assert_eq!((f.event.as_str(), f.id), (event, Some(id)), "{f:?}");
    }

    /// The next frame, which must be a gap (no resume position): its data.
    async fn gap(&mut self) -> Value {
        let gap = self.next().await.unwrap();
        assert_eq!(gap.event, "gap");
        assert_eq!(gap.id, None, "a gap is not a resume position");
        gap.data
    }

    async fn take(&mut self, n: usize) -> Vec<Frame> {
        let mut out = Vec::new();
        while out.len() < n {
            out.push(self.next().await.expect("stream ended early"));
        }
        out
    }
}

fn seqs(frames: &[Frame]) -> Vec<i64> {
    frames.iter().map(|f| f.id.unwrap()).collect()
}

#[tokio::test]
async fn resume_across_reconnects_with_10000_events_in_flight_loses_and_repeats_nothing() {
    let s = Arc::new(Server::start().await);
    let start = s.journal(&[("project.created", json!({"n": 0}))]).await[0];
    // 10,000 events, committed concurrently by four writers (250 commits
    // of 10 each), while the reader keeps dropping its connection.
    let mut writers = Vec::new();
    for w in 0..4 {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..250 {
                let batch: Vec<(&str, Value)> = (0..10)
                    .map(|k| ("work_item.updated", json!({"w": w, "i": i, "k": k})))
                    .collect();
                s.journal(&batch).await;
            }
        }));
    }
    let mut got: Vec<i64> = Vec::new();
    let mut last = start;
    let mut reconnects = 0;
    while got.len() < 10_000 {
        let mut sse = if reconnects == 0 {
            s.stream(&format!("?after={start}"), None).await
        } else {
            s.stream("", Some(last)).await
        };
        reconnects += 1;
        // Read an uneven slice, then drop the connection mid-stream.
        let want = (700 + reconnects * 37).min(10_000 - got.len());
        for f in sse.take(want).await {
            assert_eq!(f.event, "work_item.updated");
            let id = f.id.unwrap();
            assert_eq!(f.data["seq"], id);
            got.push(id);
            last = id;
        }
    }
    for w in writers {
        w.await.unwrap();
    }
    assert!(reconnects > 5, "only {reconnects} connections");
    let (status, page) = s
        .get(&format!("/api/v1/events?after={start}&limit=10000"))
        .await;
    assert_eq!(status, 200);
    let journal: Vec<i64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(journal.len(), 10_000);
    assert_eq!(got, journal, "lost, repeated or reordered events");
}

#[tokio::test]
async fn topic_prefix_and_project_filters() {
    let s = Server::start().await;
    let (st, v) = s.get("/api/v1/events/stream?project=nope").await;
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")));
    let (st, v) = s.get("/api/v1/events/stream?after=x").await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (400, Some("bad_request"))
    );
    let r = s.get_anonymous("/api/v1/events/stream").await;
    assert_eq!(r.status().as_u16(), 401);

    // A project through the API, so ?project= can resolve its uid.
    s.apply(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {displayName: Web}\n",
    )
    .await;
    let (_, p) = s.get("/api/v1/projects/web").await;
    let uid = p["metadata"]["uid"].as_str().unwrap().to_string();
    let before = s.get("/api/v1/events?after=0&limit=10000").await.1["next"]
        .as_i64()
        .unwrap();
    // The reader publishes after the commit, not in it.
    s.published_up_to(before).await;

    let mut by_topic = s.stream("?topic=run.started,work_item.", None).await;
    let mut by_prefix = s.stream("?topic=run.", None).await;
    let mut by_project = s.stream("?project=web", None).await;
    let mut all = s.stream("", None).await;
    assert_eq!(all.position, before, "X-Pam-Stream-Position is the max seq");
    let published = s
        .journal(&[
            ("run.created", json!({"project_id": uid})),
            ("run.started", json!({"project_id": "other"})),
            ("work_item.created", json!({"project": "web"})),
            ("worker.registered", json!({"host": "a"})),
            ("project.updated", json!({"project": "api"})),
            ("run.finished", json!({"project_id": uid})),
            ("marker.end", json!({})),
        ])
        .await;
    let topics = |fs: &[Frame]| fs.iter().map(|f| f.event.clone()).collect::<Vec<_>>();
    assert_eq!(
        topics(&by_topic.take(2).await),
        ["run.started", "work_item.created"]
    );
    assert_eq!(
        topics(&by_prefix.take(3).await),
        ["run.created", "run.started", "run.finished"]
    );
    assert_eq!(
        topics(&by_project.take(3).await),
        ["run.created", "work_item.created", "run.finished"]
    );
    let every = all.take(7).await;
    assert_eq!(seqs(&every), published);
    assert!(every[0].data["createdAt"].is_string());
    assert_eq!(every[0].data["payload"]["project_id"], uid.as_str());

    // The same filters page the journal; `next` continues after the last
    // row looked at.
    let (_, page) = s
        .get(&format!(
            "/api/v1/events?after={before}&topic=run.,worker.registered&limit=2"
        ))
        .await;
    assert_eq!(page_topics(&page), ["run.created", "run.started"]);
    assert_eq!(page["next"], published[1]);
    let (_, page) = s
        .get(&format!(
            "/api/v1/events?after={}&topic=run.,worker.registered&limit=2",
            published[1]
        ))
        .await;
    assert_eq!(page_topics(&page), ["worker.registered", "run.finished"]);
    let (_, page) = s
        .get(&format!(
            "/api/v1/events?after={}&project=web",
            published[1]
        ))
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["next"], published[6], "the scan reached the end");
    let (_, page) = s
        .get(&format!("/api/v1/events?after={}", published[6]))
        .await;
    assert_eq!(page["items"], json!([]));
    assert_eq!(page["next"], published[6], "an empty page keeps the cursor");
    let (st, _) = s.get("/api/v1/events?after=-1").await;
    assert_eq!(st, 400);
}

/// The topics of a page of the journal, in its order.
fn page_topics(page: &Value) -> Vec<&str> {
    let items = page["items"].as_array().unwrap();
    items.iter().map(|e| e["topic"].as_str().unwrap()).collect()
}

/// Journals three events, then moves the clock 31 days on (past the
/// 30-day retention of the tests' purges); returns their seqs.
async fn three_old_events(s: &Server) -> Vec<i64> {
    let old = s
        .journal(&[
            ("project.created", json!({})),
            ("project.updated", json!({})),
            ("project.updated", json!({})),
        ])
        .await;
    s.clock.advance(chrono::Duration::days(31));
    old
}

/// Retention's purge of what is older than 30 days: how many it deleted.
async fn purge(s: &Server) -> u64 {
    pam_controller::reconcile::retention::purge(s.ctx(), 30)
        .await
        .unwrap()
}

#[tokio::test]
async fn purged_resume_position_gets_a_gap_event_then_continues() {
    let s = Server::start().await;
    let old = three_old_events(&s).await;
    let kept = s.journal(&[("project.archived", json!({}))]).await;
    assert_eq!(purge(&s).await, 3);

    let mut sse = s.stream(&format!("?after={}", old[0]), None).await;
    let gap = sse.gap().await;
    assert_eq!(gap, json!({"from": old[1], "to": kept[0] - 1}));
    sse.expect("project.archived", kept[0]).await;
    let live = s.journal(&[("project.updated", json!({}))]).await;
    assert_eq!(sse.next().await.unwrap().id, Some(live[0]));

    // A position still in the journal gets no gap.
    let mut sse = s.stream("", Some(kept[0] - 1)).await;
    sse.expect("project.archived", kept[0]).await;
}

#[tokio::test]
async fn resume_after_retention_emptied_the_whole_journal_gets_a_gap_event() {
    let s = Server::start().await;
    let old = three_old_events(&s).await;
    assert_eq!(purge(&s).await, 3);

    // Behind the purged range: a gap up to the high-water mark, then live.
    let mut sse = s.stream(&format!("?after={}", old[0]), None).await;
    let live = s.journal(&[("project.updated", json!({}))]).await;
    assert_eq!(sse.gap().await, json!({"from": old[1], "to": old[2]}));
    assert_eq!(sse.next().await.unwrap().id, Some(live[0]));

    // Empty again; a client that had read everything gets no gap.
    s.clock.advance(chrono::Duration::days(31));
    purge(&s).await;
    let mut sse = s.stream("", Some(live[0])).await;
    let next = s.journal(&[("project.archived", json!({}))]).await;
    sse.expect("project.archived", next[0]).await;
}

#[tokio::test]
async fn a_lagging_subscriber_is_caught_up_from_the_journal() {
    // A broadcast of 4 commits: 10 commits published back to back (no
    // await in between, on this single-threaded runtime) overrun it.
    let s = Server::start_with(EventBus::new(4)).await;
    let mut sse = s.stream("", None).await;
    let ctx = s.ctx();
    // A transaction in flight that began before the ten (its xid is below
    // theirs): the reader can pass none of them while it runs, so it
    // publishes all ten at once however often the commits' notifications
    // wake it meanwhile (without it, a wake-up in the middle published a
    // few early and the subscriber kept up: a flaky test).
    let mut blocker = ctx.store.begin().await.unwrap();
    blocker
        .append_event("work_item.updated", json!({"blocker": true}), ctx.now())
        .await
        .unwrap();
    let mut commits = Vec::new();
    for c in 0..10 {
        let mut tx = ctx.store.begin().await.unwrap();
        for i in 0..50 {
            tx.append_event("work_item.updated", json!({"c": c, "i": i}), ctx.now())
                .await
                .unwrap();
        }
        commits.push(tx.commit().await.unwrap());
    }
    let want: Vec<i64> = commits.iter().flat_map(|c| c.seqs()).collect();
    // Once the blocker ends (rolled back: its event never was), all ten
    // are readable at once: one read, one page, the ten commits published
    // back to back.
    drop(blocker);
    s.settled().await;
    ctx.bus.wake();
    let got = sse.take(500).await;
    assert_eq!(seqs(&got), want);
    assert!(s.ctx().bus.lagged.get() >= 1, "the subscriber never lagged");
}

/// Concurrent commits (no lock orders them) are published in
/// the journal's one order — every event once, in the order a journal
/// read gives — to the bus and to a stream alike.
#[tokio::test]
async fn concurrent_commits_publish_in_journal_order() {
    let s = Arc::new(Server::start().await);
    let mut rx = s.ctx().bus.subscribe();
    let mut sse = s.stream("", None).await;
    let from = s.ctx().bus.published();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..60 {
                let n = 1 + (w + i) % 3;
                let batch: Vec<(&str, Value)> =
                    (0..n).map(|_| ("project.updated", json!({}))).collect();
                s.journal(&batch).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = (0..8)
        .flat_map(|w| (0..60).map(move |i| 1 + (w + i) % 3))
        .sum::<usize>();
    let streamed = seqs(&sse.take(total).await);
    let mut published = Vec::new();
    while published.len() < total {
        let commit = next_commit(&mut rx).await;
        published.extend(commit.events.iter().map(|e| e.position));
    }
    assert_eq!(published.len(), total);
    assert!(
        published.windows(2).all(|w| w[0] < w[1]),
        "published out of the journal's order"
    );
    let mut tx = s.ctx().store.begin().await.unwrap();
    let journal = tx.journal_after(from, 10_000).await.unwrap();
    let journal: Vec<_> = journal.iter().map(|e| e.position()).collect();
    assert_eq!(published, journal);
    let published: Vec<i64> = published.iter().map(|p| p.seq).collect();
    assert_eq!(streamed, published);
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let s = Server::start().await;
    let mut sse = s.stream("", None).await;
    assert_eq!(s.ctx().bus.subscribers.get(), 1);
    s.ctx().bus.shut_down();
    assert!(sse.next().await.is_none(), "the stream stayed open");
    drop(sse);
    // The server side is gone too.
    for _ in 0..1000 {
        if s.ctx().bus.subscribers.get() == 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("subscriber gauge still {}", s.ctx().bus.subscribers.get());
}

#[tokio::test]
async fn metrics_and_readiness() {
    let s = Server::start().await;
    s.apply(common::WEB_T_R1).await;
    let _sse = s.stream("", None).await;
    s.get("/api/v1/projects/web").await;
    let (st, _) = s.get("/readyz").await;
    assert_eq!(st, 200);
    // No token needed.
    let r = s.get_anonymous("/metrics").await;
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = r.text().await.unwrap();
    for want in [
        "pam_runs{phase=\"pending\"} 1",
        "pam_runs{phase=\"running\"} 0",
        "pam_hosts{phase=\"online\"} 0",
        "pam_sse_subscribers 1",
        "pam_events_journaled_total ",
        "# TYPE pam_dispatch_latency_seconds histogram",
        "pam_signals_total{outcome=\"duplicate\"} 0",
        "pam_loop_duration_seconds_count{loop=\"liveness\"} 0",
        "pam_http_request_duration_seconds_count{method=\"GET\",route=\"/api/v1/projects/{project}\",status=\"2xx\"} 1",
        "pam_build_info{version=",
        "process_start_time_seconds ",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let journaled: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("pam_events_journaled_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(journaled >= 3.0, "{journaled}");
}

/// The bus's next published commit (20 s at most: panics when it
/// published too few).
async fn next_commit(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<pam_controller::events::Published>>,
) -> Arc<pam_controller::events::Published> {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("the bus published too few")
        .unwrap()
}

/// Applies manifests through the real router.
trait PipeApply {
    async fn pipe_apply(self, yaml: &str) -> (u16, Value);
}

impl PipeApply for AppState {
    async fn pipe_apply(self, yaml: &str) -> (u16, Value) {
        use tower::ServiceExt;
        let token = make_token(&self).await;
        let body = json!({"files": [{"name": "m.yaml", "content": yaml}]}).to_string();
        let req = axum::http::Request::builder()
            .method("POST")
            .uri("/api/v1/apply")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
        let resp = router(self).oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// The journal under stress: 16 writers × 200 journaling transactions
/// through the real commit path, with pauses inside each transaction so
/// their appends and commits interleave (no lock orders them any more),
/// one in ten rolled back; meanwhile two streams (one from the start, one
/// from seq 0), a bus subscriber and a paging follower read the journal.
/// Every reader gets exactly the committed events, once each, in one and
/// the same order, and a stream resumed from the middle gets exactly the
/// rest. With the readers following seq order and no horizon, streams lose
/// the events whose transaction committed after a higher seq was read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stress_every_reader_gets_each_committed_event_once_in_one_order() {
    const WRITERS: u64 = 16;
    const TXS: u64 = 200;
    let s = Arc::new(Server::start().await);
    let start = s.journal(&[("marker.start", json!({}))]).await[0];
    let mut from_start = s
        .stream(&format!("?after={start}&topic=stress."), None)
        .await;
    let mut from_zero = s.stream("?after=0&topic=stress.", None).await;
    let mut rx = s.ctx().bus.subscribe();
    let (done_tx, done_rx) = tokio::sync::watch::channel(None::<usize>);
    let follower = {
        let store = s.ctx().store.clone();
        let mut done = done_rx.clone();
        tokio::spawn(async move {
            let mut at = pam_store::Position::START;
            let mut got = Vec::new();
            loop {
                let page = store.read_journal(at, 100).await.unwrap();
                for e in &page.events {
                    at = e.position();
                    if e.topic == "stress.write" {
                        got.push(e.seq);
                    }
                }
                if page.events.is_empty() {
                    if done.borrow().is_some_and(|n| got.len() >= n) {
                        return got;
                    }
                    let _ = tokio::time::timeout(Duration::from_millis(5), done.changed()).await;
                }
            }
        })
    };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            let mut rng = common::Rng(0x9e37_79b9_7f4a_7c15 ^ (w + 1));
            let (mut committed, mut rolled_back) = (Vec::new(), Vec::new());
            for i in 0..TXS {
                let ctx = s.ctx();
                let mut tx = ctx.store.begin().await.unwrap();
                let mut seqs = Vec::new();
                for k in 0..1 + rng.below(3) {
                    let e = tx
                        .append_event("stress.write", json!({"w": w, "i": i, "k": k}), ctx.now())
                        .await
                        .unwrap();
                    seqs.push(e.seq);
                    tokio::time::sleep(Duration::from_micros(rng.below(2000))).await;
                }
                if rng.below(10) == 0 {
                    drop(tx);
                    rolled_back.extend(seqs);
                } else {
                    ctx.commit(tx).await.unwrap();
                    committed.extend(seqs);
                }
            }
            (committed, rolled_back)
        }));
    }
    let (mut committed, mut rolled_back) = (Vec::new(), Vec::new());
    for w in writers {
        let (c, r) = w.await.unwrap();
        committed.extend(c);
        rolled_back.extend(r);
    }
    committed.sort_unstable();
    let n = committed.len();
    assert!(!rolled_back.is_empty() && n > 3000, "{n} committed");
    done_tx.send(Some(n)).unwrap();

    // The bus: one message per transaction, positions strictly ascending.
    let mut bus = Vec::new();
    let mut positions = Vec::new();
    while bus.len() < n {
        let commit = next_commit(&mut rx).await;
        for e in commit.events.iter().filter(|e| e.topic == "stress.write") {
            bus.push(e.seq);
            positions.push(e.position);
        }
    }
    assert!(
        positions.windows(2).all(|p| p[0] < p[1]),
        "bus out of order"
    );
    let streams = [
        seqs(&from_start.take(n).await),
        seqs(&from_zero.take(n).await),
    ];
    let follower = follower.await.unwrap();
    let mut sorted = bus.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted, committed,
        "the bus: lost, repeated or rolled-back events"
    );
    for (name, got) in [
        ("stream from the start", &streams[0]),
        ("stream from 0", &streams[1]),
        ("paging follower", &follower),
    ] {
        assert_eq!(got, &bus, "{name}: another order, or lost/repeated events");
    }
    // Seq order is not the journal's: the stress did interleave commits.
    assert_ne!(bus, committed, "no commit ever overtook another");

    // A stream resumed from the middle gets exactly the rest.
    let k = n / 2;
    let mut resumed = s.stream("?topic=stress.", Some(bus[k])).await;
    assert_eq!(seqs(&resumed.take(n - k - 1).await), &bus[k + 1..]);
    let tail = s.journal(&[("stress.write", json!({"tail": true}))]).await;
    assert_eq!(
        resumed.next().await.unwrap().id,
        Some(tail[0]),
        "nothing more"
    );
}
