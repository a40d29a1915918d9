//! The worker's watch stream under a connection that is cut
//! mid-message. A proxy on loopback between pam-worker and pamd cuts each
//! watch connection after a random number of response bytes (seeded,
//! bounded); the worker must resume without losing or repeating a change
//! of its desired set: 50 runs dispatched while the proxy cuts are each
//! spawned exactly once, and every one of 50 stops is delivered.
//!
//! The worker's safety nets are turned off (`resync_seconds` and
//! `tick_seconds` an hour, heartbeats ten minutes apart), so only the watch can tell it about a run or a
//! stop; and the proxy checks that it never polled (no claim long-poll).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pam_tests::worker::{
    apply, create_worker_token, events, fake, project_yaml, run_yaml, wait_online, wait_phase,
    Worker,
};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(90);
const RUNS: usize = 50;
/// Watch connections cut at most (then the proxy only forwards).
const MAX_CUTS: usize = 60;

/// A small seeded generator (xorshift64*), so a failure can be replayed
/// with `PAM_TEST_SEED`.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[derive(Default)]
struct Seen {
    /// Watch requests forwarded.
    watches: AtomicUsize,
    /// Watch connections cut.
    cuts: AtomicUsize,
    /// Claim requests that wait (the polling fallback's long-poll).
    long_polls: AtomicUsize,
}

/// Forwards loopback connections to `upstream`; the response to a watch
/// request is cut after a random number of bytes.
async fn proxy(upstream: String, seed: u64, seen: Arc<Seen>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let rng = Arc::new(Mutex::new(Rng(seed | 1)));
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let (upstream, rng, seen) = (upstream.clone(), rng.clone(), seen.clone());
            tokio::spawn(async move {
                if let Ok(server) = TcpStream::connect(&upstream).await {
                    let _ = pipe(client, server, rng, seen).await;
                }
            });
        }
    });
    url
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    rng: Arc<Mutex<Rng>>,
    seen: Arc<Seen>,
) -> std::io::Result<()> {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    // Set once the client sent a watch request on this connection: HTTP/1
    // answers in order, so every response byte after it is the watch's.
    // The value is how many bytes of it may pass (0: not a watch).
    let budget = Arc::new(AtomicUsize::new(usize::MAX));
    let up = {
        let (budget, seen) = (budget.clone(), seen.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = cr.read(&mut buf).await?;
                if n == 0 {
                    return sw.shutdown().await;
                }
                let text = String::from_utf8_lossy(&buf[..n]);
                if text.contains("GET /api/v1/workers/watch") {
                    seen.watches.fetch_add(1, Ordering::SeqCst);
                    let cut = seen.cuts.load(Ordering::SeqCst) < MAX_CUTS;
                    let at = if cut {
                        1 + rng.lock().unwrap().below(400) as usize
                    } else {
                        usize::MAX
                    };
                    budget.store(at, Ordering::SeqCst);
                }
                if text.contains("/api/v1/workers/claim?wait=") && !text.contains("wait=0") {
                    seen.long_polls.fetch_add(1, Ordering::SeqCst);
                }
                sw.write_all(&buf[..n]).await?;
            }
        })
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = sr.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let left = budget.load(Ordering::SeqCst);
        if left <= n {
            // Mid-message: part of this read, then the connection dies.
            cw.write_all(&buf[..left]).await?;
            seen.cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if left != usize::MAX {
            budget.store(left - n, Ordering::SeqCst);
        }
        cw.write_all(&buf[..n]).await?;
    }
    up.abort();
    Ok(())
}

#[tokio::test]
async fn runs_and_stops_survive_a_watch_cut_mid_message() {
    let seed = std::env::var("PAM_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::process::id() as u64 * 2_654_435_761);
    eprintln!("PAM_TEST_SEED={seed}");
    // Heartbeats ten minutes apart: the heartbeat's desired set makes the
    // worker read the set when it lists a run or a stop the last read did
    // not (the cross-replica stop), which would hide a lost frame.
    let pamd = Pamd::start(PamdOptions {
        config_toml: "[hosts]\nheartbeat_seconds = 600\noffline_after_seconds = 1800\n".into(),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let seen = Arc::new(Seen::default());
    let upstream = pamd.url.trim_start_matches("http://").to_string();
    let url = proxy(upstream, seed, seen.clone()).await;
    let token = create_worker_token(&pamd, "w1").await.unwrap();
    // No safety net: a missed frame is a run never spawned or a stop
    // never delivered.
    let toml = "heartbeat_seconds = 600\ntick_seconds = 3600\nresync_seconds = 3600\n\
                stop_grace_seconds = 2\nsnapshot_interval_ms = 200\ncapacity = 64\n";
    let w = Worker::start_with_token(&url, &token, "w1", toml).unwrap();
    wait_online(&pamd, "w1").await;
    apply(&pamd, &project_yaml());

    let names: Vec<String> = (0..RUNS).map(|i| format!("cut-{i:02}")).collect();
    for (i, name) in names.iter().enumerate() {
        apply(
            &pamd,
            &run_yaml(name, w.tmp(), &fake(&["--lines", "1", "--hang"]), ""),
        );
        if i % 5 == 4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
    for name in &names {
        wait_phase(&pamd, name, "running", T).await;
    }
    for (i, name) in names.iter().enumerate() {
        ok(&pamd.pamctl(&["-p", "e2e", "stop", name]));
        if i % 5 == 4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
    for name in &names {
        wait_phase(&pamd, name, "stopped", T).await;
    }
    eventually(T, "every session gone", || async {
        w.sessions().is_empty().then_some(())
    })
    .await;

    // Each run was claimed, started and stopped once, in its first attempt.
    for topic in ["run.spawning", "run.started", "run.stopped"] {
        let evs = events(&pamd, Some(topic)).await;
        for name in &names {
            let n = evs.iter().filter(|e| e["payload"]["name"] == *name).count();
            assert_eq!(n, 1, "{topic} of {name}: {n} times (seed {seed})");
        }
    }
    let spawns = w.log().matches(" spawning run_id=").count();
    assert_eq!(
        spawns, RUNS,
        "the worker spawned {spawns} sessions (seed {seed})"
    );
    let cuts = seen.cuts.load(Ordering::SeqCst);
    assert!(
        cuts >= 10,
        "only {cuts} watch connections were cut (seed {seed})"
    );
    assert!(seen.watches.load(Ordering::SeqCst) >= cuts);
    assert_eq!(
        seen.long_polls.load(Ordering::SeqCst),
        0,
        "the worker polled"
    );
}
