//! Roles and scoped tokens through the real pamctl against a real pamd on
//! real PostgreSQL: a viewer token of project web made with `token create
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
    assert!(
        err.contains("403 forbidden: this token may not delete runs"),
        "{err}"
    );
    assert!(!err.contains("forbidden: forbidden"), "said once: {err}");
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

/// Custom roles through the real pamctl: a `Role` applied like
/// any manifest, a token bound to it with `token create --role NAME`; the
/// token may do what one of the Role's rules allows (by project name or
/// by a selector on the projects' labels), gets 403 for a verb no rule
/// gives and 404 for a project none names; a change to the Role or to a
/// project's labels takes effect at the next request, and a deleted Role
/// leaves its tokens without rights.
#[tokio::test]
async fn a_token_bound_to_a_custom_role_may_do_what_its_rules_allow() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let yaml = format!(
        "{}---\n{}---\n{}",
        tree("web", "web"),
        tree("api", "secretapi"),
        tree("docs", "docs")
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&yaml)));
    ok(&pamd.pamctl(&["label", "project", "docs", "team=a"]));
    let role = |rules: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Role\nmetadata: {{name: run-reader}}\nspec:\n  rules:\n{rules}")
    };
    let web_runs = "  - {verbs: [get, list], kinds: [runs], projects: [web]}\n";
    let team_tasks =
        "  - {verbs: [get, list, delete], kinds: [tasks], projectSelector: {matchLabels: {team: a}}}\n";
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&role(&format!("{web_runs}{team_tasks}"))),
    ));
    let roles = ok(&pamd.pamctl(&["get", "roles"]));
    assert!(roles.contains("run-reader"), "{roles}");

    // Bad input: the field and the line of a bad verb and kind.
    let bad = role("  - {verbs: [get, frob], kinds: [taks], projects: [web]}\n");
    let out = pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&bad));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("spec.rules[0].verbs[1]") && err.contains("\"frob\" is not a verb"),
        "{err}"
    );
    assert!(err.contains("spec.rules[0].kinds[0]"), "{err}");
    assert!(err.contains("line 6"), "{err}");
    // An unknown role is refused when the token is made.
    let out = pamd.pamctl(&["token", "create", "nobody", "--role", "no-such-role"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && err.contains("no-such-role"),
        "{err}"
    );

    let token = ok(&pamd.pamctl(&["token", "create", "rr", "--role", "run-reader"]))
        .trim()
        .to_string();
    let as_rr = |args: &[&str]| pamd.pamctl_as(Some(&token), args, None);
    let who = ok(&as_rr(&["whoami"]));
    assert!(who.contains("rr") && who.contains("run-reader"), "{who}");

    // Allowed: web's runs, docs' tasks (by its label).
    let runs = ok(&as_rr(&["get", "runs", "-p", "web"]));
    assert!(runs.contains("web-run"), "{runs}");
    let tasks = ok(&as_rr(&["get", "tasks", "-p", "docs"]));
    assert!(tasks.contains("docs-task"), "{tasks}");
    // A verb no rule gives in a project it sees: 403.
    let err = fails(&as_rr(&["get", "tasks", "-p", "web"]), 3);
    assert!(err.contains("forbidden"), "{err}");
    let err = fails(&as_rr(&["delete", "run", "web-run", "-p", "web"]), 3);
    assert!(err.contains("forbidden"), "{err}");
    // A project no rule names: as if it did not exist.
    let err = fails(&as_rr(&["get", "runs", "-p", "api"]), 3);
    assert!(
        err.contains("not found") && !err.contains("secretapi"),
        "{err}"
    );
    // Every project's runs: only where it may list runs (not docs, whose
    // tasks it may list, nor api).
    let all = ok(&as_rr(&["get", "runs", "-A"]));
    assert!(
        all.contains("web-run") && !all.contains("secretapi") && !all.contains("docs-run"),
        "{all}"
    );
    // Cluster-wide kinds stay the admin's.
    let err = fails(&as_rr(&["get", "roles"]), 3);
    assert!(err.contains("forbidden"), "{err}");
    // can-i answers from the same rules.
    let yes = ok(&as_rr(&["auth", "can-i", "list", "runs", "-p", "web"]));
    assert_eq!(yes.trim(), "yes");
    let no = as_rr(&["auth", "can-i", "delete", "runs", "-p", "web"]);
    assert_eq!(no.status.code(), Some(1));
    // A delete a rule allows.
    ok(&as_rr(&["delete", "task", "docs-task", "-p", "docs"]));

    // The Role changes: api's runs from the next request on.
    let api_runs = "  - {verbs: [get, list], kinds: [runs], projects: [web, api]}\n";
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&role(&format!("{api_runs}{team_tasks}"))),
    ));
    let runs = ok(&as_rr(&["get", "runs", "-p", "api"]));
    assert!(runs.contains("secretapi-run"), "{runs}");
    // A project's labels change: api joins team a, its tasks are seen.
    fails(&as_rr(&["get", "tasks", "-p", "api"]), 3);
    ok(&pamd.pamctl(&["label", "project", "api", "team=a"]));
    let tasks = ok(&as_rr(&["get", "tasks", "-p", "api"]));
    assert!(tasks.contains("secretapi-task"), "{tasks}");

    // The Role is deleted: its tokens keep nothing but whoami.
    ok(&pamd.pamctl(&["delete", "role", "run-reader"]));
    let err = fails(&as_rr(&["get", "runs", "-p", "web"]), 3);
    assert!(err.contains("not found"), "{err}");
    let who = ok(&as_rr(&["whoami"]));
    assert!(who.contains("run-reader"), "{who}");
}
