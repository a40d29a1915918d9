//! Apply and diff through pamctl against a real pamd on real PostgreSQL: apply
//! created/unchanged/configured, `-f -` and `-R`, diff exit codes, dry run,
//! prune with and without a selector, 409 on a stale resourceVersion, kind
//! aliases.

use std::path::Path;

use pam_tests::{fails, ok, Pamd, PamdOptions};

const TREE: &str = r#"apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {displayName: Web shop}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: launch, project: web}
spec: {type: milestone, title: Launch}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: checkout, project: web}
spec: {type: epic, title: Checkout, parent: launch}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: web, labels: {team: pay}}
spec: {title: Cart, parent: checkout}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart-ui, project: web, labels: {team: pay}}
spec: {type: subtask, title: Cart UI, parent: cart}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: pay, project: web}
spec: {title: Payment, parent: checkout, status: done}
"#;

fn write(dir: &Path, rel: &str, text: &str) -> String {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

fn task_names(pamd: &Pamd) -> Vec<String> {
    sorted_lines(&ok(
        &pamd.pamctl(&["get", "tasks", "-p", "web", "-o", "name"])
    ))
}

#[tokio::test]
async fn apply_created_unchanged_configured_from_stdin_and_directories() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    // -f - reads stdin.
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    assert_eq!(
        sorted_lines(&out),
        [
            "project.pam.dev/web created",
            "web/task.pam.dev/cart created",
            "web/task.pam.dev/cart-ui created",
            "web/task.pam.dev/checkout created",
            "web/task.pam.dev/launch created",
            "web/task.pam.dev/pay created",
        ]
    );
    // The same objects from a directory tree (-R): all unchanged, no event.
    let tmp = tempfile::tempdir().unwrap();
    let docs: Vec<&str> = TREE.split("---\n").collect();
    write(tmp.path(), "project.yaml", docs[0]);
    write(tmp.path(), "tasks/top.yaml", &docs[1..3].join("---\n"));
    write(tmp.path(), "tasks/deep/rest.yml", &docs[3..].join("---\n"));
    write(tmp.path(), "tasks/deep/notes.txt", "not a manifest");
    let dir = tmp.path().display().to_string();
    let events_before = ok(&pamd.pamctl(&["events"])).lines().count();
    assert!(events_before >= 6, "creation is journaled");
    let out = ok(&pamd.pamctl(&["apply", "-R", "-f", &dir]));
    assert_eq!(out.lines().count(), 6, "{out}");
    assert!(out.lines().all(|l| l.ends_with(" unchanged")), "{out}");
    assert_eq!(
        ok(&pamd.pamctl(&["events"])).lines().count(),
        events_before,
        "an unchanged apply journals nothing"
    );
    // Without -R only the top level is read.
    let out = ok(&pamd.pamctl(&["apply", "-f", &dir]));
    assert_eq!(out, "project.pam.dev/web unchanged\n");

    // A spec change: configured, generation 2; the others unchanged.
    write(
        tmp.path(),
        "tasks/deep/rest.yml",
        &docs[3..]
            .join("---\n")
            .replace("title: Cart,", "title: Shopping cart,"),
    );
    let out = ok(&pamd.pamctl(&["apply", "-R", "-f", &dir]));
    assert!(out.contains("web/task.pam.dev/cart configured\n"), "{out}");
    assert_eq!(out.matches(" configured").count(), 1, "{out}");
    let cart: serde_json::Value = serde_json::from_str(&ok(
        &pamd.pamctl(&["get", "task", "cart", "-p", "web", "-o", "json"])
    ))
    .unwrap();
    assert_eq!(cart["metadata"]["generation"], 2);
    assert_eq!(cart["status"]["observedGeneration"], 2);
    assert_eq!(cart["spec"]["title"], "Shopping cart");

    // Kind aliases: singular, plural, short.
    for kind in ["task", "tasks", "tk"] {
        let names = sorted_lines(&ok(&pamd.pamctl(&["get", kind, "-p", "web", "-o", "name"])));
        assert_eq!(names.len(), 5, "{kind}: {names:?}");
    }
    for kind in ["project", "projects", "proj"] {
        let out = ok(&pamd.pamctl(&["get", kind, "-o", "name"]));
        assert_eq!(out.lines().count(), 1, "{kind}: {out}");
    }
    let err = fails(&pamd.pamctl(&["get", "widgets"]), 2);
    assert!(err.contains("widgets"), "{err}");
}

#[tokio::test]
async fn diff_exit_codes_and_dry_run_writes_nothing() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "tree.yaml", TREE);

    // Nothing stored yet: diff shows every object (exit 1).
    let d = pamd.pamctl(&["diff", "-f", &f]);
    assert_eq!(d.status.code(), Some(1));
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(text.contains("+  title: Cart"), "{text}");

    // --dry-run=server reports creations and writes nothing.
    let out = ok(&pamd.pamctl(&["apply", "-f", &f, "--dry-run=server"]));
    assert_eq!(out.lines().count(), 6, "{out}");
    assert!(
        out.lines()
            .all(|l| l.ends_with(" created (server dry run)")),
        "{out}"
    );
    let none = pamd.pamctl(&["get", "projects", "-o", "name"]);
    assert_eq!(ok(&none), "", "dry run wrote nothing");
    assert_eq!(
        ok(&pamd.pamctl(&["events"])),
        "",
        "dry run journaled nothing"
    );

    ok(&pamd.pamctl(&["apply", "-f", &f]));
    // Same input: exit 0, no output.
    let d = pamd.pamctl(&["diff", "-f", &f]);
    assert_eq!(d.status.code(), Some(0), "{d:?}");
    assert!(d.stdout.is_empty());

    // A change: exit 1 with a unified diff of the spec.
    let g = write(
        tmp.path(),
        "tree2.yaml",
        &TREE.replace("title: Payment,", "title: Payments,"),
    );
    let d = pamd.pamctl(&["diff", "-f", &g]);
    assert_eq!(d.status.code(), Some(1), "{d:?}");
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(text.contains("-  title: Payment\n"), "{text}");
    assert!(text.contains("+  title: Payments\n"), "{text}");
    assert!(!text.contains("Cart"), "only the changed object: {text}");

    // A dry-run of the change writes nothing either.
    let out = ok(&pamd.pamctl(&["apply", "-f", &g, "--dry-run=server"]));
    assert!(
        out.contains("web/task.pam.dev/pay configured (server dry run)"),
        "{out}"
    );
    assert_eq!(pamd.pamctl(&["diff", "-f", &g]).status.code(), Some(1));

    // Errors are > 1: an invalid manifest (3), a missing file (2), an
    // unreachable server (4).
    let bad = write(
        tmp.path(),
        "bad.yaml",
        &TREE.replace("title: Payment,", "title: Payment, colour: red,"),
    );
    let err = fails(&pamd.pamctl(&["diff", "-f", &bad]), 3);
    assert!(err.contains("spec.colour: unknown field"), "{err}");
    fails(&pamd.pamctl(&["diff", "-f", "/nonexistent/x.yaml"]), 2);
    let out = pamd.pamctl(&[
        "diff",
        "-f",
        &f,
        "--server",
        &format!("http://127.0.0.1:{}", pam_tests::free_port()),
    ]);
    fails(&out, 4);
}

#[tokio::test]
async fn prune_needs_a_selector_and_deletes_only_the_selected_set() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "tree.yaml", TREE);
    ok(&pamd.pamctl(&["apply", "-f", &f]));
    // Drop cart-ui (team=pay) and pay (no labels) from the input.
    let docs: Vec<&str> = TREE.split("---\n").collect();
    let fewer = [docs[0], docs[1], docs[2], docs[3]].join("---\n");
    let g = write(tmp.path(), "fewer.yaml", &fewer);

    // Never without a selector: refused by pamctl before any request.
    let err = fails(&pamd.pamctl(&["apply", "-f", &g, "--prune"]), 2);
    assert!(err.contains("selector"), "{err}");
    assert_eq!(task_names(&pamd).len(), 5);

    // --dry-run=server lists what would be deleted, deletes nothing.
    let out = ok(&pamd.pamctl(&[
        "apply",
        "-f",
        &g,
        "--prune",
        "-l",
        "team=pay",
        "--dry-run=server",
    ]));
    assert!(
        out.contains("web/task.pam.dev/cart-ui pruned (server dry run)\n"),
        "{out}"
    );
    assert_eq!(out.matches("pruned").count(), 1, "only cart-ui: {out}");
    assert_eq!(task_names(&pamd).len(), 5, "dry run deleted nothing");

    // For real: cart-ui goes; pay (outside the selector) stays.
    let out = ok(&pamd.pamctl(&["apply", "-f", &g, "--prune", "-l", "team=pay"]));
    assert!(out.contains("web/task.pam.dev/cart-ui pruned\n"), "{out}");
    assert_eq!(
        task_names(&pamd),
        ["task/cart", "task/checkout", "task/launch", "task/pay"]
    );
    let ev = ok(&pamd.pamctl(&["events", "--topic", "work_item.deleted"]));
    assert_eq!(ev.lines().count(), 1, "{ev}");

    // With an applyset: apply labels every object, prune removes what left.
    ok(&pamd.pamctl(&["apply", "-f", &f, "--applyset", "web"]));
    assert_eq!(task_names(&pamd).len(), 5);
    // `diff --applyset` compares as that apply would write (no label
    // noise: exit 0 on the same input) and lists what it would prune as
    // deletions, writing nothing.
    let same = pamd.pamctl(&["diff", "-f", &f, "--applyset", "web"]);
    assert_eq!(same.status.code(), Some(0), "{same:?}");
    let d = pamd.pamctl(&["diff", "-f", &g, "--applyset", "web"]);
    assert_eq!(d.status.code(), Some(1), "{d:?}");
    let text = String::from_utf8_lossy(&d.stdout).to_string();
    for gone in ["cart-ui", "pay"] {
        assert!(
            text.contains(&format!(
                "--- web/task.pam.dev/{gone} (live)\n+++ /dev/null\n"
            )),
            "{text}"
        );
    }
    assert_eq!(text.matches("+++ /dev/null").count(), 2, "{text}");
    assert_eq!(task_names(&pamd).len(), 5, "diff deleted nothing");
    let err = fails(&pamd.pamctl(&["diff", "-f", &g, "--prune"]), 2);
    assert!(
        err.contains("--prune needs -l SELECTOR or --applyset NAME"),
        "{err}"
    );
    let out = ok(&pamd.pamctl(&["apply", "-f", &g, "--applyset", "web", "--prune"]));
    let pruned: Vec<&str> = out.lines().filter(|l| l.ends_with(" pruned")).collect();
    let mut pruned = pruned.clone();
    pruned.sort();
    assert_eq!(
        pruned,
        [
            "web/task.pam.dev/cart-ui pruned",
            "web/task.pam.dev/pay pruned"
        ]
    );
    assert_eq!(
        task_names(&pamd),
        ["task/cart", "task/checkout", "task/launch"]
    );
    assert_eq!(
        ok(&pamd.pamctl(&["get", "projects", "-o", "name"]))
            .lines()
            .count(),
        1,
        "the project is in the input and kept"
    );
}

#[tokio::test]
async fn stale_resource_version_is_a_409_naming_the_object() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    // Remember cart's resourceVersion, change cart, then apply with the
    // remembered (now stale) one.
    let get_cart = || -> serde_json::Value {
        serde_json::from_str(&ok(
            &pamd.pamctl(&["get", "task", "cart", "-p", "web", "-o", "json"])
        ))
        .unwrap()
    };
    let rv = get_cart()["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion is a string")
        .to_string();
    let other = TREE.replace("title: Cart,", "title: Cart v2,");
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&other)));
    assert_ne!(get_cart()["metadata"]["resourceVersion"], rv.as_str());
    let stale = format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: cart, project: web, resourceVersion: \"{rv}\"}}\nspec: {{title: Cart v3, parent: checkout}}\n"
    );
    let err = fails(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&stale)), 3);
    assert!(err.contains("409"), "{err}");
    assert!(err.contains("Task web/cart"), "{err}");
    assert!(
        err.contains(&format!("resourceVersion {rv} is stale")),
        "{err}"
    );
    assert_eq!(get_cart()["spec"]["title"], "Cart v2", "nothing written");
    // The current resourceVersion is accepted.
    let rv2 = get_cart()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let fresh = stale.replace(&format!("\"{rv}\""), &format!("\"{rv2}\""));
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&fresh)));
    assert_eq!(out, "web/task.pam.dev/cart configured\n");
}
