//! Issue 34 through the real pamctl against a real pamd on real
//! PostgreSQL: a viewer token of project web made with `token create
//! --role viewer --project web` reads web, changes nothing, and sees
//! nothing of project api; `whoami` and `auth can-i` answer from the same
//! decision the routes use.

use pam_tests::{fails, ok, Pamd, PamdOptions};

fn tree(project: &str, prefix: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: {project}}}\nspec: {{}}\n\
---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {prefix}-task, project: {project}}}\nspec: {{title: T}}\n\
---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {prefix}-run, project: {project}}}\nspec: {{task: {prefix}-task, provider: claude, prompt: hi, cwd: /tmp}}\n"
    )
}

#[tokio::test]
async fn a_viewer_of_web_reads_web_only_and_changes_nothing() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let yaml = format!("{}---\n{}", tree("web", "web"), tree("api", "secretapi"));
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&yaml)));

    let viewer = ok(&pamd.pamctl(&[
        "token",
        "create",
        "web-view",
        "--role",
        "viewer",
        "--project",
        "web",
    ]))
    .trim()
    .to_string();
    let list = ok(&pamd.pamctl(&["token", "list"]));
    let row = list.lines().find(|l| l.contains("web-view")).unwrap();
    assert!(row.contains("viewer") && row.contains(" web "), "{list}");
    let as_viewer = |args: &[&str]| pamd.pamctl_as(Some(&viewer), args, None);

    let who = ok(&as_viewer(&["whoami"]));
    assert!(who.contains("web-view") && who.contains("viewer"), "{who}");
    let runs = ok(&as_viewer(&["get", "runs", "-p", "web"]));
    assert!(runs.contains("web-run"), "{runs}");
    // Every project's runs: web's only.
    let all = ok(&as_viewer(&["get", "runs", "-A"]));
    assert!(
        all.contains("web-run") && !all.contains("secretapi"),
        "{all}"
    );
    // api is as if it did not exist.
    let out = as_viewer(&["get", "runs", "-p", "api"]);
    let err = fails(&out, 3);
    assert!(err.contains("not found"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("secretapi"));
    assert!(!err.contains("secretapi"), "{err}");
    // A viewer changes nothing.
    let err = fails(&as_viewer(&["delete", "run", "web-run", "-p", "web"]), 3);
    assert!(err.contains("forbidden"), "{err}");
    // The hint speaks of the token's role, not of worker tokens.
    assert!(err.contains("pamctl whoami"), "{err}");
    assert!(!err.contains("pamw_"), "{err}");
    ok(&pamd.pamctl(&["get", "run", "web-run", "-p", "web"]));
    // can-i: exit 0 yes, 1 no.
    assert_eq!(
        ok(&as_viewer(&["auth", "can-i", "get", "runs", "-p", "web"])).trim(),
        "yes"
    );
    let out = as_viewer(&["auth", "can-i", "delete", "run", "-p", "web"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    let out = as_viewer(&["auth", "can-i", "get", "runs", "-p", "api"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        ok(&pamd.pamctl(&["auth", "can-i", "delete", "tokens"])).trim(),
        "yes"
    );

    // The audit trail: an operator of web stops web's run; its events
    // name it, in `events --actor` and in describe's BY column.
    let operator = ok(&pamd.pamctl(&[
        "token",
        "create",
        "web-op",
        "--role",
        "operator",
        "--project",
        "web",
    ]))
    .trim()
    .to_string();
    ok(&pamd.pamctl_as(Some(&operator), &["stop", "web-run", "-p", "web"], None));
    let task = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: by-op, project: web}\nspec: {title: T}\n";
    ok(&pamd.pamctl_as(Some(&operator), &["apply", "-f", "-"], Some(task)));
    let mine = ok(&pamd.pamctl(&["events", "--actor", "web-op"]));
    assert!(mine.contains("task/by-op"), "{mine}");
    assert!(
        !mine.contains("secretapi") && !mine.contains("web-task"),
        "{mine}"
    );
    let described = ok(&pamd.pamctl(&["describe", "task", "by-op", "-p", "web"]));
    assert!(
        described.contains(" BY ") && described.contains("web-op"),
        "{described}"
    );
    // The operator cannot write api, nor learn it exists.
    let api_task = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: sneaky, project: api}\nspec: {title: T}\n";
    let err = fails(
        &pamd.pamctl_as(Some(&operator), &["apply", "-f", "-"], Some(api_task)),
        3,
    );
    assert!(
        err.contains("forbidden") && !err.contains("\"api\""),
        "{err}"
    );
}
