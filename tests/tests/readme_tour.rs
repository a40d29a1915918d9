//! The README's tour, run as a newcomer runs it — pamd with its
//! local worker, the tour's manifest (read from README.md, so the two
//! cannot drift apart), then `examples/webshop/` — ends with every run it
//! creates in the phase the README says: `hello-1` stopped, `webhook-tests`
//! exited with code 0.

use std::path::{Path, PathBuf};

use pam_tests::worker::{FAST_PAMD_TOML, FAST_WORKER_TOML};
use pam_tests::{ok, Pamd, PamdOptions};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The tour's heredoc: the lines between `pamctl apply -f - <<'EOF'` and
/// `EOF` in README.md.
fn tour_manifest() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("pamctl apply -f - <<'EOF'\n")
        .expect("the README's tour applies a heredoc");
    let body = &readme[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("\nEOF\n").expect("the heredoc ends")].to_string()
}

#[tokio::test]
async fn the_readme_tour_ends_with_every_run_in_the_phase_it_says() {
    let sock_dir = tempfile::Builder::new()
        .prefix("pamtour")
        .tempdir()
        .unwrap();
    let socket = sock_dir.path().join("tmux.sock");
    let pamd = Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        args: vec!["--local-worker".into()],
        worker_toml: Some(format!(
            "tmux_socket = {:?}\n{FAST_WORKER_TOML}",
            socket.display().to_string()
        )),
        ..PamdOptions::default()
    })
    .await
    .unwrap();

    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&tour_manifest())));
    ok(&pamd.pamctl(&[
        "-p",
        "demo",
        "wait",
        "run/hello-1",
        "--for=phase=running",
        "--timeout",
        "1m",
    ]));
    ok(&pamd.pamctl(&["-p", "demo", "stop", "hello-1"]));
    ok(&pamd.pamctl(&[
        "-p",
        "demo",
        "wait",
        "run/hello-1",
        "--for=phase=stopped",
        "--timeout",
        "1m",
    ]));

    let webshop = repo().join("examples/webshop");
    let webshop = webshop.to_str().unwrap();
    ok(&pamd.pamctl(&["apply", "-R", "-f", webshop]));
    let again = ok(&pamd.pamctl(&["apply", "-R", "-f", webshop]));
    assert!(
        again.lines().all(|l| l.ends_with("unchanged")),
        "a second apply changes nothing: {again}"
    );
    ok(&pamd.pamctl(&[
        "-p",
        "webshop",
        "wait",
        "run/webhook-tests",
        "--for=phase=exited",
        "--timeout",
        "1m",
    ]));
    ok(&pamd.pamctl(&["diff", "-R", "-f", webshop]));

    let runs = pamd.get("/api/v1/runs").await.unwrap();
    let mut phases: Vec<(String, String, Option<i64>)> = runs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["metadata"]["name"].as_str().unwrap().to_string(),
                r["status"]["phase"].as_str().unwrap().to_string(),
                r["status"]["exitCode"].as_i64(),
            )
        })
        .collect();
    phases.sort();
    let names: Vec<(&str, &str)> = phases
        .iter()
        .map(|(n, p, _)| (n.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        names,
        [("hello-1", "stopped"), ("webhook-tests", "exited")],
        "{runs}"
    );
    assert_eq!(phases[1].2, Some(0), "webhook-tests exits 0: {runs}");
    // The tour's instance serves its metrics in under 30 KB
    // (bounded route labels, few buckets), with pamd's build and process.
    let metrics = reqwest::get(format!("{}/metrics", pamd.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    eprintln!(
        "/metrics after the tour: {} bytes, {} bucket lines",
        metrics.len(),
        metrics.lines().filter(|l| l.contains("_bucket{")).count()
    );
    assert!(metrics.len() < 30 * 1024, "{} bytes", metrics.len());
    for series in [
        "pam_build_info{",
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    // The audit trail: every event the tour's requests journaled names
    // the token that made it; the loops' and workers' own name none.
    // (`run.stopped` is journaled when the stop takes effect, by the
    // worker's report, and names who asked.)
    let journal = pamd.get("/api/v1/events?limit=10000").await.unwrap();
    let made_by_requests = [
        "project.created",
        "work_item.created",
        "run.created",
        "run.stop_requested",
        "run.stopped",
    ];
    let mut stops = 0;
    for e in journal["items"].as_array().unwrap() {
        let topic = e["topic"].as_str().unwrap();
        if made_by_requests.contains(&topic) {
            assert_eq!(e["actor"]["role"], "admin", "{e}");
            assert!(
                e["actor"]["name"].as_str().is_some_and(|n| !n.is_empty()),
                "{e}"
            );
            stops += usize::from(topic == "run.stopped");
        } else {
            assert!(e.get("actor").is_none(), "a loop's or worker's event: {e}");
        }
    }
    assert_eq!(stops, 1, "{journal}");
    // The agent runs are apart, and say what they need.
    let agents = std::fs::read_to_string(repo().join("examples/agents/runs.yaml")).unwrap();
    assert!(agents.contains("NEED THE PROVIDER'S CLI"), "{agents}");
    let _ = std::process::Command::new("tmux")
        .arg("-S")
        .arg(&socket)
        .arg("kill-server")
        .status();
}
