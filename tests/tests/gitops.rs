//! GitOps Sources end to end, on a real pamd and real PostgreSQL,
//! with local git repositories made in the test (`file://` URLs) and
//! watched directories.

use std::path::Path;
use std::time::Duration;

use pam_tests::git::{commit, git, write};
use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};
use serde_json::{json, Value};

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n";

fn task(project: &str, name: &str, title: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {name}, project: {project}}}\nspec: {{title: {title}}}\n"
    )
}

fn git_source(name: &str, repo: &Path, projects: &str, extra: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: {name}}}\nspec:\n  git: {{url: 'file://{}', ref: main}}\n  interval: 1s\n  projects: [{projects}]\n{extra}",
        repo.display()
    )
}

/// pamd's options for directory Sources in the test's temporary
/// directories: outside pamd's data dir, so allowed by `[sources]
/// allowed_roots`.
fn dir_opts() -> PamdOptions {
    PamdOptions {
        config_toml: format!(
            "[sources]\nallowed_roots = [{:?}]\n",
            std::env::temp_dir().display().to_string()
        ),
        ..Default::default()
    }
}

fn dir_source(name: &str, dir: &Path, projects: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: {name}}}\nspec:\n  path: '{}'\n  interval: 1m\n  projects: [{projects}]\n",
        dir.display()
    )
}

/// A directory Source `d` of project web, task t and its run r1 (no
/// worker: pending), applied; its directory (kept while it lives).
fn project_task_run(pamd: &Pamd) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.yaml", PROJECT);
    write(dir.path(), "t.yaml", &task("web", "t", "T"));
    write(
        dir.path(),
        "r.yaml",
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: t, provider: claude, prompt: hi, cwd: /tmp}\n",
    );
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    dir
}

async fn source(pamd: &Pamd, name: &str) -> Value {
    pamd.get(&format!("/api/v1/sources/{name}")).await.unwrap()
}

/// Waits until the Source's status matches.
async fn until(pamd: &Pamd, name: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    eventually(Duration::from_secs(20), what, || async {
        let s = source(pamd, name).await;
        f(&s["status"]).then_some(s)
    })
    .await
}

fn tasks(pamd: &Pamd, project: &str) -> Vec<String> {
    let mut v: Vec<String> = ok(&pamd.pamctl(&["get", "tasks", "-p", project, "-o", "name"]))
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn topics(pamd: &Pamd, topic: &str) -> usize {
    ok(&pamd.pamctl(&["events", "--topic", topic]))
        .lines()
        .count()
}

#[tokio::test]
async fn a_git_source_applies_prunes_fails_whole_and_recovers() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    write(repo.path(), "project.yaml", PROJECT);
    write(repo.path(), "tasks/a.yaml", &task("web", "a", "A"));
    let c1 = commit(repo.path(), "one");
    let src = git_source("web", repo.path(), "web", "");
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&src)));
    let s = until(&pamd, "web", "first sync", |st| {
        st["revision"] == c1.as_str()
    })
    .await;
    assert_eq!(s["status"]["sync"], "Synced");
    assert_eq!(s["status"]["health"], "Healthy");
    assert_eq!(s["status"]["inventory"], 2);
    assert_eq!(tasks(&pamd, "web"), ["task/a"]);

    // A commit adding a task is applied within the interval.
    write(repo.path(), "tasks/b.yaml", &task("web", "b", "B"));
    let c2 = commit(repo.path(), "two");
    until(&pamd, "web", "second sync", |st| {
        st["revision"] == c2.as_str()
    })
    .await;
    assert_eq!(tasks(&pamd, "web"), ["task/a", "task/b"]);

    // A commit removing a file prunes exactly that object; an operator's
    // task in the same project stays.
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&task("web", "mine", "Mine"))));
    std::fs::remove_file(repo.path().join("tasks/a.yaml")).unwrap();
    let c3 = commit(repo.path(), "three");
    until(&pamd, "web", "prune", |st| st["revision"] == c3.as_str()).await;
    assert_eq!(tasks(&pamd, "web"), ["task/b", "task/mine"]);
    assert_eq!(topics(&pamd, "source.pruned"), 1);

    // A bad commit (an unknown field) applies nothing: Failed with
    // file:line, the last good revision kept.
    write(repo.path(), "tasks/c.yaml", &task("web", "c", "C"));
    write(
        repo.path(),
        "tasks/b.yaml",
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: b, project: web}\nspec:\n  title: B\n  colour: red\n",
    );
    let bad = commit(repo.path(), "bad");
    let s = until(&pamd, "web", "failure", |st| st["sync"] == "Failed").await;
    let st = &s["status"];
    assert_eq!(st["revision"], c3.as_str(), "the last good revision stays");
    assert_eq!(st["attemptedRevision"], bad.as_str());
    let msg = st["syncMessage"].as_str().unwrap();
    assert!(
        msg.contains("tasks/b.yaml") && msg.contains("line 6"),
        "{msg}"
    );
    assert!(msg.contains("colour"), "{msg}");
    assert_eq!(st["errors"][0]["file"], "tasks/b.yaml");
    assert!(st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Stalled" && c["status"] == "True"));
    assert_eq!(
        tasks(&pamd, "web"),
        ["task/b", "task/mine"],
        "nothing applied"
    );
    // pamctl sync reports the failure with a non-zero exit.
    let err = fails(&pamd.pamctl(&["sync", "web", "--timeout", "20s"]), 1);
    assert!(err.contains("tasks/b.yaml"), "{err}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        topics(&pamd, "source.sync_failed"),
        1,
        "journaled once per revision"
    );

    // A revert brings Synced back.
    git(repo.path(), &["revert", "--no-edit", "HEAD"]);
    let c5 = git(repo.path(), &["rev-parse", "HEAD"]);
    until(&pamd, "web", "revert", |st| {
        st["revision"] == c5.as_str() && st["sync"] == "Synced"
    })
    .await;
    assert_eq!(tasks(&pamd, "web"), ["task/b", "task/mine"]);
    let out = ok(&pamd.pamctl(&["sync", "web"]));
    assert!(out.starts_with("source.pam.dev/web Synced at "), "{out}");
    let table = ok(&pamd.pamctl(&["get", "sources"]));
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains(&format!(
            "web    false       {0}    {0}     Synced   Healthy   ",
            &c5[..7]
        )),
        "{table}"
    );
}

#[tokio::test]
async fn two_sources_never_prune_each_others_objects_and_stay_in_their_projects() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    write(one.path(), "p.yaml", PROJECT);
    write(one.path(), "a.yaml", &task("web", "a", "A"));
    write(two.path(), "b.yaml", &task("web", "b", "B"));
    let srcs = format!(
        "{}---\n{}",
        dir_source("one", one.path(), "web"),
        dir_source("two", two.path(), "web")
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&srcs)));
    until(&pamd, "one", "one synced", |st| st["sync"] == "Synced").await;
    until(&pamd, "two", "two synced", |st| {
        st["sync"] == "Synced" && st["inventory"] == 1
    })
    .await;
    assert_eq!(tasks(&pamd, "web"), ["task/a", "task/b"]);
    // Source two empties its tree: only its own task goes.
    std::fs::remove_file(two.path().join("b.yaml")).unwrap();
    until(&pamd, "two", "two pruned", |st| st["inventory"] == 0).await;
    assert_eq!(tasks(&pamd, "web"), ["task/a"]);
    // Source two declaring one's object is refused, naming the owner.
    write(two.path(), "a.yaml", &task("web", "a", "Taken"));
    let s = until(&pamd, "two", "conflict", |st| st["sync"] == "Failed").await;
    let msg = s["status"]["syncMessage"].as_str().unwrap();
    assert!(msg.contains("a.yaml") && msg.contains("\"one\""), "{msg}");
    // A project outside spec.projects is refused with file:line.
    std::fs::remove_file(two.path().join("a.yaml")).unwrap();
    write(two.path(), "x.yaml", &task("other", "x", "X"));
    let s = until(&pamd, "two", "scope", |st| {
        st["syncMessage"]
            .as_str()
            .unwrap_or("")
            .contains("spec.projects")
    })
    .await;
    let msg = s["status"]["syncMessage"].as_str().unwrap();
    assert!(msg.starts_with("x.yaml: document 0, line 3"), "{msg}");
    assert_eq!(tasks(&pamd, "web"), ["task/a"]);
}

#[tokio::test]
async fn a_watched_directory_applies_an_edit_quickly_and_never_half_a_batch() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.yaml", PROJECT);
    write(dir.path(), "a.yaml", &task("web", "a", "A"));
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    until(&pamd, "d", "synced", |st| st["sync"] == "Synced").await;
    // The interval is a minute: the watch applies an edit within 2 s.
    write(dir.path(), "a.yaml", &task("web", "a", "Edited"));
    let t0 = std::time::Instant::now();
    eventually(Duration::from_secs(2), "the edit applied", || async {
        let t = pamd.get("/api/v1/projects/web/tasks/a").await.unwrap();
        (t["spec"]["title"] == "Edited").then_some(())
    })
    .await;
    assert!(t0.elapsed() < Duration::from_secs(2));
    // Applied incrementally: only the changed file's changed object.
    assert_eq!(syncs(&pamd, "changed").await, 1);
    // A half-written file: two new tasks, the second document cut mid-way.
    let whole = format!(
        "{}---\n{}",
        task("web", "n1", "N1"),
        task("web", "n2", "N2")
    );
    write(dir.path(), "new.yaml", &whole[..whole.len() - 12]);
    until(&pamd, "d", "failed", |st| st["sync"] == "Failed").await;
    assert_eq!(tasks(&pamd, "web"), ["task/a"], "nothing of the batch");
    write(dir.path(), "new.yaml", &whole);
    until(&pamd, "d", "resynced", |st| st["sync"] == "Synced").await;
    assert_eq!(tasks(&pamd, "web"), ["task/a", "task/n1", "task/n2"]);
}

/// How many Source syncs ended as `result`, from pamd's metrics.
async fn syncs(pamd: &Pamd, result: &str) -> u64 {
    let series = format!("pam_source_sync_duration_seconds_count{{result=\"{result}\"}}");
    pamd.metric(&series).await.map_or(0, |n| n as u64)
}

#[tokio::test]
async fn drift_is_reported_refused_without_force_and_healed_once() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.yaml", PROJECT);
    write(dir.path(), "a.yaml", &task("web", "a", "A"));
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    until(&pamd, "d", "synced", |st| st["sync"] == "Synced").await;
    // A status moved on the board: the manifest does not set it, no drift.
    ok(&pamd.pamctl(&["task", "start", "a", "-p", "web"]));
    let out = ok(&pamd.pamctl(&["sync", "d"]));
    assert!(out.contains(" Synced "), "{out}");
    let t = pamd.get("/api/v1/projects/web/tasks/a").await.unwrap();
    assert_eq!(
        t["status"]["phase"], "doing",
        "the sync left the operator's status"
    );
    // pamctl apply of an owned title: 409 naming the Source and the field.
    let mine = task("web", "a", "Mine");
    let err = fails(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&mine)), 3);
    assert!(
        err.contains("spec.title") && err.contains("Source d"),
        "{err}"
    );
    ok(&pamd.pamctl_stdin(&["apply", "--force-conflicts", "-f", "-"], Some(&mine)));
    let out = fails(&pamd.pamctl(&["sync", "d"]), 1);
    let s = source(&pamd, "d").await;
    assert_eq!(s["status"]["sync"], "OutOfSync", "{out}");
    assert_eq!(
        s["status"]["drift"][0]["fields"],
        serde_json::json!(["spec.title"])
    );
    // selfHeal puts it back, journaled once.
    let healing = dir_source("d", dir.path(), "web") + "  selfHeal: true\n";
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&healing)));
    until(&pamd, "d", "healed", |st| st["sync"] == "Synced").await;
    let t = pamd.get("/api/v1/projects/web/tasks/a").await.unwrap();
    assert_eq!(t["spec"]["title"], "A");
    ok(&pamd.pamctl(&["sync", "d"]));
    assert_eq!(topics(&pamd, "source.healed"), 1);
    assert_eq!(topics(&pamd, "source.drift_detected"), 1);
}

#[tokio::test]
async fn pamd_killed_mid_sync_applies_nothing_twice() {
    let mut pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.yaml", PROJECT);
    let mut many = String::new();
    for i in 0..300 {
        many.push_str(&task("web", &format!("t{i}"), "T"));
        many.push_str("---\n");
    }
    write(dir.path(), "many.yaml", &many);
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    // Kill as soon as the Source exists: the first sync may or may not
    // have committed; either way it is all or nothing.
    tokio::time::sleep(Duration::from_millis(150)).await;
    pamd.kill9();
    pamd.start_again().await.unwrap();
    until(&pamd, "d", "synced after restart", |st| {
        st["sync"] == "Synced"
    })
    .await;
    ok(&pamd.pamctl(&["sync", "d"]));
    assert_eq!(tasks(&pamd, "web").len(), 300);
    // The killed pamd's transaction may hold the journal's horizon back
    // until PostgreSQL ends it; the events show once it has.
    let created = eventually(Duration::from_secs(30), "the created events", || async {
        let n = topics(&pamd, "work_item.created");
        (n >= 300).then_some(n)
    })
    .await;
    assert_eq!(created, 300, "each task created once");
    assert_eq!(topics(&pamd, "source.synced"), 1, "one sync applied it");
}

/// Regression: `apply --prune -l` pruned matching objects in
/// every project, also projects the batch never names.
#[tokio::test]
async fn prune_with_a_selector_stays_in_the_batch_projects() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let labelled = |p: &str, n: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {n}, project: {p}, labels: {{team: x}}}}\nspec: {{title: T}}\n")
    };
    let both = format!(
        "{PROJECT}---\napiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: ops}}\nspec: {{}}\n---\n{}---\n{}---\n{}",
        labelled("web", "keep"),
        labelled("web", "old"),
        labelled("ops", "theirs")
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&both)));
    let out = ok(&pamd.pamctl_stdin(
        &["apply", "--prune", "-l", "team=x", "-f", "-"],
        Some(&labelled("web", "keep")),
    ));
    assert!(out.contains("task.pam.dev/old pruned"), "{out}");
    assert_eq!(
        tasks(&pamd, "ops"),
        ["task/theirs"],
        "another project is not pruned"
    );
}

/// Prune never deletes what the Source does not own through a cascade: a
/// source-owned epic that leaves the tree while an operator's subtask (with
/// a run) hangs under it is kept and released, journaled as
/// `source.prune_skipped` naming what held it; likewise a source-owned
/// project holding an operator's task. With nothing of the operator's under
/// it, the same prune deletes.
#[tokio::test]
async fn prune_never_cascades_into_what_the_source_does_not_own() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.yaml", PROJECT);
    let epic = |name: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {name}, project: web}}\nspec: {{type: epic, title: E}}\n")
    };
    write(dir.path(), "epic.yaml", &epic("epic"));
    write(dir.path(), "lone.yaml", &epic("lone"));
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    until(&pamd, "d", "first sync", |st| st["inventory"] == 3).await;
    // The operator hangs a task (with a run) under the Source's epic.
    let mine = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: mine, project: web}\nspec: {title: Mine, parent: epic}\n---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r-mine, project: web}\nspec: {task: mine, provider: claude, prompt: hi, cwd: /tmp}\n";
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(mine)));

    std::fs::remove_file(dir.path().join("epic.yaml")).unwrap();
    std::fs::remove_file(dir.path().join("lone.yaml")).unwrap();
    ok(&pamd.pamctl(&["sync", "d"]));
    let s = until(&pamd, "d", "prune", |st| st["inventory"] == 1).await;
    assert_eq!(s["status"]["sync"], "Synced", "{s}");
    // `lone` had nothing under it: pruned. `epic` holds the operator's
    // task and run: kept, with them, and no longer the Source's.
    assert_eq!(tasks(&pamd, "web"), ["task/epic", "task/mine"]);
    assert_eq!(
        ok(&pamd.pamctl(&["-p", "web", "get", "runs", "-o", "name"])),
        "run/r-mine\n"
    );
    assert_eq!(topics(&pamd, "source.pruned"), 1);
    let skipped = pamd
        .get("/api/v1/events?topic=source.prune_skipped")
        .await
        .unwrap();
    let items = skipped["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{skipped}");
    let p = &items[0]["payload"];
    assert_eq!(
        (p["kind"].as_str(), p["name"].as_str()),
        (Some("Task"), Some("epic"))
    );
    assert_eq!(
        p["held"],
        serde_json::json!(["task mine", "run r-mine"]),
        "{p}"
    );
    // Both stay listed with the Source's objects — `lone`
    // Pruned, `epic` Held with what held it — in the API and in the tree
    // of `get source -o wide`.
    let departed = |s: &Value, name: &str| -> Value {
        s["status"]["objects"]
            .as_array()
            .and_then(|os| os.iter().find(|o| o["name"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let s = source(&pamd, "d").await;
    let lone = departed(&s, "lone");
    assert_eq!(
        (&lone["sync"], &lone["health"]),
        (&json!("Pruned"), &json!("Missing")),
        "{s}"
    );
    let epic = departed(&s, "epic");
    assert_eq!(epic["sync"], "Held", "{s}");
    assert!(
        epic["message"].as_str().unwrap().contains("run r-mine"),
        "{s}"
    );
    let wide = ok(&pamd.pamctl(&["get", "source", "d", "-o", "wide"]));
    assert!(
        wide.lines()
            .any(|l| l.contains("Task/epic") && l.contains("Held")),
        "{wide}"
    );
    assert!(
        wide.lines()
            .any(|l| l.contains("─ Task/lone") && l.contains("Pruned")),
        "{wide}"
    );
    // Released: a later sync neither retries nor journals it again, and
    // (the same revision) keeps what the last one saw leave.
    ok(&pamd.pamctl(&["sync", "d"]));
    assert_eq!(topics(&pamd, "source.prune_skipped"), 1);
    let s = source(&pamd, "d").await;
    assert_eq!(departed(&s, "lone")["sync"], "Pruned", "{s}");

    // The project itself leaves the tree: it holds the operator's tasks,
    // so it is kept too.
    std::fs::remove_file(dir.path().join("p.yaml")).unwrap();
    ok(&pamd.pamctl(&["sync", "d"]));
    until(&pamd, "d", "project released", |st| st["inventory"] == 0).await;
    assert_eq!(tasks(&pamd, "web"), ["task/epic", "task/mine"]);
    assert_eq!(topics(&pamd, "source.prune_skipped"), 2);
    // A new revision: what left at it replaces what left before.
    let s = eventually(
        Duration::from_secs(5),
        "the project listed Held",
        || async {
            let s = source(&pamd, "d").await;
            (departed(&s, "web")["sync"] == "Held").then_some(s)
        },
    )
    .await;
    assert_eq!(departed(&s, "lone"), Value::Null, "{s}");
}

/// Health rolls up the owned runs: a run the sync creates is pending
/// (Progressing, counted from what the sync wrote); once it is stopped the
/// Source is Healthy with no sync (level-triggered) — at once in
/// a get of it, within a second in a listing (the loop's refresh).
#[tokio::test]
async fn health_follows_the_owned_runs() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let _dir = project_task_run(&pamd);
    let s = until(&pamd, "d", "first sync", |st| st["sync"] == "Synced").await;
    assert_eq!(s["status"]["health"], "Progressing", "{s}");
    assert_eq!(s["status"]["healthMessage"], "1 run(s) pending or running");
    assert_eq!(s["status"]["inventory"], 3);
    let synced_at = s["status"]["lastAttemptAt"].clone();
    ok(&pamd.pamctl(&["-p", "web", "stop", "r1"]));
    eventually(Duration::from_secs(5), "the run stopped", || async {
        let r = pamd.get("/api/v1/projects/web/runs/r1").await.unwrap();
        (r["status"]["phase"] == "stopped").then_some(())
    })
    .await;
    let s = source(&pamd, "d").await;
    assert_eq!(s["status"]["health"], "Healthy", "{s}");
    let listed = eventually(Duration::from_secs(2), "Healthy in the listing", || async {
        let l = pamd.get("/api/v1/sources").await.unwrap();
        let d = l["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["metadata"]["name"] == "d")
            .cloned()
            .unwrap();
        (d["status"]["health"] == "Healthy").then_some(d)
    })
    .await;
    assert_eq!(
        listed["status"]["lastAttemptAt"], synced_at,
        "no sync ran: {listed}"
    );
    assert_eq!(
        ok(&pamd.pamctl(&["get", "sources", "-o", "jsonpath={.items[0].status.health}"])),
        "Healthy"
    );
}

/// A get of one Source lists each owned object with its own sync
/// and health, read when asked — a run that stops turns Healthy within a
/// second with no sync; an owned field changed by another path is
/// OutOfSync, a deleted object Missing; `describe` shows them as a table.
#[tokio::test]
async fn each_owned_object_has_its_own_sync_and_health_without_a_sync() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let _dir = project_task_run(&pamd);
    until(&pamd, "d", "first sync", |st| st["sync"] == "Synced").await;
    let state = |s: &Value, kind: &str| -> Value {
        s["status"]["objects"]
            .as_array()
            .and_then(|os| os.iter().find(|o| o["kind"] == kind).cloned())
            .unwrap_or(Value::Null)
    };
    let s = source(&pamd, "d").await;
    assert_eq!(
        s["status"]["objects"].as_array().map(Vec::len),
        Some(3),
        "{s}"
    );
    let r = state(&s, "Run");
    assert_eq!(
        (&r["sync"], &r["health"], &r["message"]),
        (&json!("Synced"), &json!("Progressing"), &json!("pending")),
        "{s}"
    );
    assert_eq!(state(&s, "Project")["health"], "Healthy", "{s}");
    let t = state(&s, "Task");
    assert_eq!(
        (&t["health"], &t["message"]),
        (&json!("Healthy"), &json!("todo")),
        "{s}"
    );
    // A task being worked on is Progressing, at once.
    ok(&pamd.pamctl(&["-p", "web", "task", "start", "t"]));
    let s = source(&pamd, "d").await;
    assert_eq!(state(&s, "Task")["health"], "Progressing", "{s}");

    // No sync from here on (the interval is a minute, nothing is written
    // to the directory): the objects' states follow them.
    ok(&pamd.pamctl(&["-p", "web", "stop", "r1"]));
    let stopped = std::time::Instant::now();
    let s = eventually(Duration::from_secs(5), "the run Healthy", || async {
        let s = source(&pamd, "d").await;
        (state(&s, "Run")["health"] == "Healthy").then_some(s)
    })
    .await;
    assert!(
        stopped.elapsed() < Duration::from_secs(1),
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(state(&s, "Run")["message"], "stopped", "{s}");
    ok(&pamd.pamctl_stdin(
        &["apply", "--force-conflicts", "-f", "-"],
        Some(&task("web", "t", "Changed")),
    ));
    let s = source(&pamd, "d").await;
    let t = state(&s, "Task");
    assert_eq!(
        (&t["sync"], &t["message"]),
        (&json!("OutOfSync"), &json!("spec.title")),
        "{s}"
    );
    ok(&pamd.pamctl(&["-p", "web", "delete", "run", "r1"]));
    let s = source(&pamd, "d").await;
    assert_eq!(state(&s, "Run")["sync"], "Missing", "{s}");
    let described = ok(&pamd.pamctl(&["describe", "source", "d"]));
    assert!(described.contains("Objects:"), "{described}");
    assert!(
        described
            .lines()
            .any(|l| l.contains("Task") && l.contains("OutOfSync") && l.contains("spec.title")),
        "{described}"
    );
}

/// A Source whose first revision is bad has applied nothing: Failed with
/// file:line, and its health is Unknown (there is nothing to roll up),
/// not Healthy; once the file is mended it is Synced and Healthy.
#[tokio::test]
async fn a_source_that_never_applied_has_unknown_health() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.yaml",
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {colour: red}\n",
    );
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    let s = until(&pamd, "d", "failed", |st| st["sync"] == "Failed").await;
    assert_eq!(s["status"]["health"], "Unknown", "{s}");
    assert_eq!(s["status"]["healthMessage"], "no revision applied yet");
    assert!(
        s["status"]["syncMessage"]
            .as_str()
            .unwrap()
            .starts_with("p.yaml: document 0, line 4"),
        "{s}"
    );
    write(dir.path(), "p.yaml", PROJECT);
    let s = until(&pamd, "d", "synced", |st| st["sync"] == "Synced").await;
    assert_eq!(s["status"]["health"], "Healthy", "{s}");
}

const RUN_C: &str = "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: c-run, project: web}\nspec: {task: c, provider: claude, prompt: hi, cwd: /tmp}\n";

/// The uids of task `c` and run `c-run`.
async fn uids(pamd: &Pamd) -> (Value, Value) {
    let t = pamd.get("/api/v1/projects/web/tasks/c").await.unwrap();
    let r = pamd.get("/api/v1/projects/web/runs/c-run").await.unwrap();
    (t["metadata"]["uid"].clone(), r["metadata"]["uid"].clone())
}

/// Waits until the Source is Synced at `revision` with nothing pending.
async fn settled_at(pamd: &Pamd, name: &str, revision: &str) {
    until(pamd, name, "synced again", |st| {
        st["revision"] == revision && st["sync"] == "Synced" && st["syncMessage"].is_null()
    })
    .await;
}

/// Writes `text` into `path` as a generator does: opened (truncating),
/// `text[..at]` written, a pause with the file held open, the rest.
async fn write_paused(path: &Path, text: &str, at: usize, pause: Duration) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&text.as_bytes()[..at]).unwrap();
    tokio::time::sleep(pause).await;
    f.write_all(&text.as_bytes()[at..]).unwrap();
}

/// A slowly written file neither prunes nor re-runs anything: a file rewritten
/// with the same content by a writer that pauses (1.5 s, 10 s) with the
/// file open, truncated then written, or written beside the tree and
/// renamed in, never drives a prune nor re-creates anything: no
/// `source.pruned`, the task's and the run's uids unchanged (the run is
/// not run again), and while a file is held open the Source says it is
/// waiting — not Failed.
#[tokio::test]
async fn a_file_still_being_written_never_prunes_or_recreates() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.yaml");
    write(dir.path(), "p.yaml", PROJECT);
    let whole = format!("{}---\n{RUN_C}", task("web", "c", "C"));
    // The first chunk is a whole document set: Task c, without its run.
    let at = whole.find("---").unwrap();
    std::fs::write(&file, &whole).unwrap();
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    let s = until(&pamd, "d", "first sync", |st| st["inventory"] == 3).await;
    let revision = s["status"]["revision"].as_str().unwrap().to_string();
    let before = uids(&pamd).await;

    // Two chunks 1.5 s apart (the reported case), then 10 s apart.
    write_paused(&file, &whole, at, Duration::from_millis(1500)).await;
    settled_at(&pamd, "d", &revision).await;
    assert_eq!(topics(&pamd, "source.pruned"), 0, "the 1.5 s pause");
    assert_eq!(uids(&pamd).await, before, "the 1.5 s pause");
    let long = {
        let file = file.clone();
        let whole = whole.clone();
        tokio::spawn(async move { write_paused(&file, &whole, at, Duration::from_secs(10)).await })
    };
    let s = until(&pamd, "d", "waiting", |st| {
        st["syncMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("waiting for files to settle"))
    })
    .await;
    let st = &s["status"];
    assert_eq!(
        st["syncMessage"],
        "waiting for files to settle: tasks.yaml is open for writing"
    );
    assert_eq!(st["sync"], "Synced", "waiting is no failure: {s}");
    assert!(st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Reconciling" && c["status"] == "True"));
    long.await.unwrap();
    settled_at(&pamd, "d", &revision).await;

    // Truncated (the file kept open), written 1.5 s later.
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.set_len(0).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        f.write_all(whole.as_bytes()).unwrap();
    }
    settled_at(&pamd, "d", &revision).await;

    // Written slowly beside the tree (not a manifest name), renamed in.
    let tmp = dir.path().join("tasks.yaml.tmp");
    write_paused(&tmp, &whole, at, Duration::from_millis(1500)).await;
    std::fs::rename(&tmp, &file).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    settled_at(&pamd, "d", &revision).await;

    assert_eq!(topics(&pamd, "source.pruned"), 0);
    assert_eq!(uids(&pamd).await, before, "nothing re-created");
    assert_eq!(
        ok(&pamd.pamctl(&["-p", "web", "get", "runs", "-o", "name"])),
        "run/c-run\n"
    );
}

/// Directory Sources read only under allowed roots: a `spec.path` outside
/// pamd's data dir and `[sources] allowed_roots` — by a symlink, by `..`,
/// `/proc/self`, `/` — is refused before anything is read: Failed and
/// Stalled, naming the path and the roots, never a file under it. Under
/// an allowed root (or the data dir) it syncs; a path that does not exist
/// yet is refused until it does.
#[tokio::test]
async fn a_directory_source_reads_only_under_the_allowed_roots() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // What must never show: another directory's file name and content.
    write(
        outside.path(),
        "private-notes.yaml",
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: x, project: elsewhere}\nspec: {title: TOPSECRET}\n",
    );
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!(
            "[sources]\nallowed_roots = [{:?}]\n",
            allowed.path().display().to_string()
        ),
        ..Default::default()
    })
    .await
    .unwrap();
    std::fs::create_dir(allowed.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), allowed.path().join("link")).unwrap();
    let escape = format!(
        "{}/sub/../../{}",
        allowed.path().display(),
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let refused = [
        ("link", allowed.path().join("link").display().to_string()),
        ("dotdot", escape),
        ("proc", "/proc/self".to_string()),
        ("root", "/".to_string()),
    ];
    for (name, path) in &refused {
        let src = format!(
            "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: {name}}}\nspec:\n  path: '{path}'\n  interval: 1m\n  projects: [web]\n"
        );
        ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&src)));
        let s = until(&pamd, name, "refused", |st| st["sync"] == "Failed").await;
        let st = &s["status"];
        let msg = st["syncMessage"].as_str().unwrap();
        assert!(
            msg.contains("is outside the directories Sources may read")
                && msg.contains("allowed_roots"),
            "{name}: {msg}"
        );
        let text = s.to_string();
        assert!(
            !text.contains("private-notes") && !text.contains("TOPSECRET"),
            "{name}: {text}"
        );
        assert_eq!(st["inventory"], 0, "{name}");
        assert!(st["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Stalled" && c["status"] == "True"));
    }
    let events = ok(&pamd.pamctl(&["events", "--topic", "source.sync_failed"]));
    assert!(!events.contains("TOPSECRET"), "{events}");

    // Under the allowed root: not there yet (refused, looked for again),
    // then synced.
    let later = allowed.path().join("later");
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("ok", &later, "web")),
    ));
    let s = until(&pamd, "ok", "missing", |st| st["sync"] == "Failed").await;
    let msg = s["status"]["syncMessage"].as_str().unwrap();
    assert!(msg.contains("does not exist"), "{msg}");
    write(&later, "p.yaml", PROJECT);
    ok(&pamd.pamctl(&["sync", "ok"]));
    until(&pamd, "ok", "synced", |st| st["sync"] == "Synced").await;
    // pamd's data dir is always allowed.
    let data = pamd.data_dir.join("trees/t");
    write(&data, "t.yaml", &task("web", "t", "T"));
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("data", &data, "web")),
    ));
    until(&pamd, "data", "synced", |st| st["sync"] == "Synced").await;
    assert_eq!(tasks(&pamd, "web"), ["task/t"]);
}

/// `spec.substitute` — variables from a Secret and literal ones
/// in string values (a newline in a value stays in its string); `$${…}` a
/// literal; an unset variable fails the sync at its file:line, applying
/// nothing; a changed Secret is picked up by the next sync.
#[tokio::test]
async fn substitution_from_a_secret_acts_on_values_only() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    write(
        repo.path(),
        "t.yaml",
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: a, project: web}\nspec:\n  title: ${TITLE}\n  description: \"${EVIL} / $${LITERAL} / ${TEAM}\"\n  sortOrder: ${ORDER:=7}\n",
    );
    let c1 = commit(repo.path(), "one");
    let setup = format!(
        "{PROJECT}---\napiVersion: pam.dev/v1\nkind: Secret\nmetadata: {{name: vars, project: web}}\nspec:\n  stringData:\n    TITLE: From a Secret\n    EVIL: \"x\\nstatus: {{}}\"\n---\n{}",
        git_source("web", repo.path(), "web", "  substitute:\n    vars: {TEAM: core}\n    fromSecrets: [{project: web, name: vars}]\n")
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&setup)));
    until(&pamd, "web", "first sync", |st| {
        st["revision"] == c1.as_str()
    })
    .await;
    let t = pamd.get("/api/v1/projects/web/tasks/a").await.unwrap();
    assert_eq!(t["spec"]["title"], "From a Secret", "{t}");
    assert_eq!(
        t["spec"]["description"], "x\nstatus: {} / ${LITERAL} / core",
        "{t}"
    );
    assert_eq!(t["spec"]["sortOrder"], 7, "{t}");
    assert!(
        t.get("status").is_none_or(|s| s.get("hacked").is_none()),
        "{t}"
    );

    // An unset variable: the sync fails at its line; nothing applied.
    write(
        repo.path(),
        "u.yaml",
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: b, project: web}\nspec:\n  title: ${NOPE}\n",
    );
    commit(repo.path(), "two");
    let s = until(&pamd, "web", "failure", |st| st["sync"] == "Failed").await;
    let msg = s["status"]["syncMessage"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("u.yaml: document 0, line 5, column 10: spec.title: ${NOPE} is not set"),
        "{msg}"
    );
    assert_eq!(tasks(&pamd, "web"), ["task/a"]);

    // The Secret gets the variable: the next sync applies both.
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: pam.dev/v1\nkind: Secret\nmetadata: {name: vars, project: web}\nspec:\n  stringData:\n    TITLE: Renamed\n    EVIL: e\n    NOPE: found\n"),
    ));
    ok(&pamd.pamctl(&["sync", "web"]));
    assert_eq!(tasks(&pamd, "web"), ["task/a", "task/b"]);
    let t = pamd.get("/api/v1/projects/web/tasks/a").await.unwrap();
    assert_eq!(t["spec"]["title"], "Renamed", "{t}");
    let b = pamd.get("/api/v1/projects/web/tasks/b").await.unwrap();
    assert_eq!(b["spec"]["title"], "found", "{b}");
}

/// A Secret's value that fails validation after substitution — as a
/// name, a kind, an enum, a label value — is never printed: the sync's
/// message, the Source's status, `pamctl describe`, `pamctl diff source`
/// and the `source.sync_failed` event name the variable and the field,
/// not the value.
#[tokio::test]
async fn a_substituted_secret_value_that_fails_validation_is_never_shown() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    let cases = [
        // (file, document, the Secret's key, its value)
        (
            "name.yaml",
            "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: ${NAME}\n  project: web\nspec: {title: T}\n",
            "NAME",
            "Hunter2_Secret_Name",
        ),
        (
            "kind.yaml",
            "apiVersion: pam.dev/v1\nkind: ${KIND}\nmetadata: {name: k, project: web}\nspec: {title: T}\n",
            "KIND",
            "Kind0fSecretValue",
        ),
        (
            "enum.yaml",
            "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r, project: web}\nspec:\n  task: t\n  provider: claude\n  prompt: p\n  cwd: /tmp\n  restartPolicy: ${POLICY}\n",
            "POLICY",
            "sekret-policy-value",
        ),
        (
            "label.yaml",
            "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: l, project: web, labels: {team: \"${LABEL}\"}}\nspec: {title: T}\n",
            "LABEL",
            "not a label value!",
        ),
    ];
    write(repo.path(), "t.yaml", &task("web", "t", "T"));
    for (file, doc, _, _) in &cases {
        write(repo.path(), file, doc);
    }
    commit(repo.path(), "one");
    let mut data = String::new();
    for (_, _, key, value) in &cases {
        data.push_str(&format!("    {key}: \"{value}\"\n"));
    }
    let setup = format!(
        "{PROJECT}---\napiVersion: pam.dev/v1\nkind: Secret\nmetadata: {{name: vars, project: web}}\nspec:\n  stringData:\n{data}---\n{}",
        git_source("web", repo.path(), "web", "  substitute:\n    fromSecrets: [{project: web, name: vars}]\n")
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&setup)));
    let s = until(&pamd, "web", "the failed sync", |st| st["sync"] == "Failed").await;
    let status = s["status"].to_string();
    for (file, _, key, _) in &cases {
        assert!(status.contains(file), "{file} in {status}");
        assert!(
            status.contains(&format!("${{{key}}}")),
            "${{{key}}} named in {status}"
        );
    }
    let shown = [
        status,
        ok(&pamd.pamctl(&["get", "source", "web", "-o", "yaml"])),
        ok(&pamd.pamctl(&["describe", "source", "web"])),
        String::from_utf8_lossy(&pamd.pamctl(&["diff", "source", "web"]).stdout).into_owned()
            + &String::from_utf8_lossy(&pamd.pamctl(&["diff", "source", "web"]).stderr),
        String::from_utf8_lossy(&pamd.pamctl(&["sync", "web"]).stderr).into_owned(),
        ok(&pamd.pamctl(&["events", "--topic", "source.sync_failed"])),
        pamd.get("/api/v1/events").await.unwrap().to_string(),
    ];
    assert!(
        shown[6].contains("source.sync_failed") && shown[6].contains("KIND"),
        "the event is journaled, naming the variables: {}",
        shown[6]
    );
    for text in &shown {
        for (_, _, _, value) in &cases {
            assert!(!text.contains(value), "{value:?} shown in:\n{text}");
        }
    }
    assert!(
        tasks(&pamd, "web").is_empty(),
        "nothing of the batch applied"
    );
}

/// `pamctl diff source NAME [--revision REF]` shows what a sync
/// would change — created, configured, pruned — without changing anything.
#[tokio::test]
async fn diff_source_previews_the_next_sync_without_applying_it() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    write(repo.path(), "project.yaml", PROJECT);
    write(repo.path(), "tasks/a.yaml", &task("web", "a", "A"));
    write(repo.path(), "tasks/c.yaml", &task("web", "c", "C"));
    let c1 = commit(repo.path(), "one");
    let src = git_source("web", repo.path(), "web", "").replace("interval: 1s", "interval: 1h");
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&src)));
    until(&pamd, "web", "first sync", |st| {
        st["revision"] == c1.as_str()
    })
    .await;

    write(repo.path(), "tasks/b.yaml", &task("web", "b", "B"));
    write(repo.path(), "tasks/c.yaml", &task("web", "c", "Cee"));
    std::fs::remove_file(repo.path().join("tasks/a.yaml")).unwrap();
    let c2 = commit(repo.path(), "two");
    let diffed = pamd.pamctl(&["diff", "source", "web"]);
    fails(&diffed, 1);
    let out = String::from_utf8_lossy(&diffed.stdout);
    assert!(
        out.contains(&format!("source.pam.dev/web at {} would change:", &c2[..7])),
        "{out}"
    );
    for line in [
        "task.pam.dev/web/b created",
        "task.pam.dev/web/c configured",
        "task.pam.dev/web/a pruned",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    // Nothing was applied, journaled or pruned.
    assert_eq!(tasks(&pamd, "web"), ["task/a", "task/c"]);
    assert_eq!(topics(&pamd, "source.pruned"), 0);
    let s = source(&pamd, "web").await;
    assert_eq!(s["status"]["revision"], c1.as_str());
    // The applied revision previews as no change; a bad one as git's error.
    let same = ok(&pamd.pamctl(&["diff", "source", "web", "--revision", &c1]));
    assert!(same.contains("no changes"), "{same}");
    let bad = pamd.pamctl(&["diff", "source", "web", "--revision", "no-such-branch"]);
    assert!(!bad.status.success());
    // After the sync, nothing is left to preview.
    ok(&pamd.pamctl(&["sync", "web"]));
    assert!(ok(&pamd.pamctl(&["diff", "source", "web"])).contains("no changes"));
}

/// `pam.dev/sync-wave` orders the objects of a kind within one
/// sync (and one apply): runs are created — and journaled — by wave, then
/// file order; a wave that is not a whole number is refused at its line
/// and nothing of the batch is written.
#[tokio::test]
async fn sync_waves_order_creation_and_a_bad_wave_is_refused_at_its_line() {
    let pamd = Pamd::start(dir_opts()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.yaml", PROJECT);
    write(dir.path(), "t.yaml", &task("web", "t", "T"));
    let run = |name: &str, wave: Option<&str>| {
        let annotations = wave
            .map(|w| format!(", annotations: {{pam.dev/sync-wave: '{w}'}}"))
            .unwrap_or_default();
        format!("apiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {name}, project: web{annotations}}}\nspec: {{task: t, provider: claude, prompt: hi, cwd: /tmp}}\n")
    };
    // File order a, b, c, d; waves 2, none (0), -1, 1.
    write(dir.path(), "a.yaml", &run("late", Some("2")));
    write(dir.path(), "b.yaml", &run("plain", None));
    write(dir.path(), "c.yaml", &run("first", Some("-1")));
    write(dir.path(), "d.yaml", &run("middle", Some("1")));
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&dir_source("d", dir.path(), "web")),
    ));
    until(&pamd, "d", "first sync", |st| st["inventory"] == 6).await;
    let created = pamd.get("/api/v1/events?topic=run.created").await.unwrap();
    let order: Vec<&str> = created["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["name"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(order, ["first", "plain", "middle", "late"], "{created}");

    // A bad wave: the whole revision is refused at the annotation's line.
    write(dir.path(), "e.yaml", &run("bad", Some("soon")));
    write(dir.path(), "f.yaml", &task("web", "other", "O"));
    // (`pamctl sync` itself fails with the sync: its answer is not what
    // is checked here.)
    let _ = pamd.pamctl(&["sync", "d"]);
    let s = until(&pamd, "d", "refused", |st| st["sync"] == "Failed").await;
    let message = s["status"]["syncMessage"].as_str().unwrap();
    assert!(message.contains("e.yaml: document 0, line 3"), "{message}");
    assert!(message.contains("pam.dev/sync-wave"), "{message}");
    assert!(message.contains("expected an integer"), "{message}");
    assert_eq!(
        tasks(&pamd, "web"),
        ["task/t"],
        "nothing of the batch is written"
    );
    // The same rule for `pamctl apply`.
    let out = pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&run("bad2", Some("1.5"))));
    let err = fails(&out, 3);
    assert!(
        err.contains("pam.dev/sync-wave") && err.contains("expected an integer"),
        "{err}"
    );
}
