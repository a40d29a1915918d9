//! Observability: the Grafana dashboard
//! (`deploy/grafana/pam.json`) queries only metrics pamd serves, and
//! `--log-format json` logs JSON lines. A real pamd and worker are driven until every
//! family has a series — a claude run reporting usage (tokens, cost), a
//! directory Source syncing, a Webhook whose receiver is refused — and
//! each metric name in each panel's expression must then be in
//! `/metrics`.

use std::collections::BTreeSet;
use std::time::Duration;

use pam_tests::worker::{
    apply, create_worker_token, fake, project_yaml, wait_online, wait_phase, Worker,
    FAST_PAMD_TOML, FAST_WORKER_TOML,
};
use pam_tests::{eventually, Pamd, PamdOptions};
use serde_json::Value;

const T: Duration = Duration::from_secs(60);

fn repo_file(rel: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(rel)).unwrap()
}

/// Every `pam_…` or `process_…` name in the dashboard's expressions.
fn queried(dashboard: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let bytes = expr.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                let starts_name =
                    i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
                let rest = &expr[i..];
                if starts_name && (rest.starts_with("pam_") || rest.starts_with("process_")) {
                    let len = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    names.insert(rest[..len].to_string());
                    i += len;
                } else {
                    i += 1;
                }
            }
        }
    }
    names
}

#[test]
fn the_dashboard_names_the_metrics_it_queries() {
    let d: Value = serde_json::from_str(&repo_file("deploy/grafana/pam.json")).unwrap();
    let names = queried(&d);
    for want in [
        "pam_dispatch_latency_seconds_bucket",
        "pam_runs",
        "pam_cost_usd_total",
        "pam_webhook_deliveries_pending",
        "pam_source_sync_duration_seconds_count",
        "pam_loop_duration_seconds_sum",
        "process_resident_memory_bytes",
    ] {
        assert!(names.contains(want), "{want} not queried: {names:?}");
    }
    // Label names in a selector are not metrics.
    assert!(
        !names.iter().any(|n| n == "pam_" || n.ends_with("_")),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_grafana_dashboard_queries_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!(
            "{FAST_PAMD_TOML}[sources]\nallowed_roots = [{:?}]\n",
            std::env::temp_dir().display().to_string()
        ),
        args: vec!["--log-format".into(), "json".into()],
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let worker_toml = format!(
        "{FAST_WORKER_TOML}[providers.claude]\ncommand = {}\n",
        serde_json::to_string(&fake(&["--format", "claude", "--lines", "2"])).unwrap()
    );
    let w = Worker::start_with_token(&pamd.url, &token, "h1", &worker_toml).unwrap();
    wait_online(&pamd, "h1").await;
    let cwd = w.tmp().display().to_string();
    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: synced\nspec: {}\n",
    )
    .unwrap();
    apply(
        &pamd,
        &format!(
            "{}---\napiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: g1\n  project: e2e\nspec:\n  task: t1\n  provider: claude\n  prompt: go\n  cwd: {cwd:?}\n---\n\
             apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: dir}}\nspec:\n  path: '{}'\n  interval: 1m\n  projects: [synced]\n---\n\
             apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: signing\n  project: e2e\nspec:\n  stringData:\n    key: s3cret-signing-key\n---\n\
             apiVersion: pam.dev/v1\nkind: Webhook\nmetadata:\n  name: refused\nspec:\n  url: http://127.0.0.1:9/hook\n  topics: [run.finished]\n  signingSecretRef:\n    project: e2e\n    name: signing\n    key: key\n",
            project_yaml(),
            dir.path().display()
        ),
    );
    wait_phase(&pamd, "g1", "exited", T).await;

    let d: Value = serde_json::from_str(&repo_file("deploy/grafana/pam.json")).unwrap();
    let names = queried(&d);
    let text = eventually(T, "every queried metric served", || async {
        let text = reqwest::get(format!("{}/metrics", pamd.url))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let served = |name: &str| {
            text.lines().any(|l| {
                l.strip_prefix(name)
                    .is_some_and(|r| r.starts_with(['{', ' ']))
            })
        };
        names.iter().all(|n| served(n)).then_some(text)
    })
    .await;
    // What the dashboard shows per project and webhook is there too.
    assert!(
        text.contains("pam_cost_usd_total{provider=\"claude\""),
        "{text}"
    );
    assert!(
        text.contains("pam_webhook_deliveries_pending{webhook=\"refused\"}"),
        "{text}"
    );
    drop(w);
    // Every line pamd logged is one JSON object with a level and fields.
    let log = pamd.log();
    assert!(log.lines().count() > 3, "{log}");
    for line in log.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
}
