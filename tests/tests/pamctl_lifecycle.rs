//! The lifecycle verbs through pamctl against a real pamd: task
//! start/done/cancel/reopen with the cancel cascade, reparenting (paths
//! rewritten, `work_item.reparented` once), host disable/enable, and token
//! refusals (none, unknown, revoked).

use pam_tests::{fails, ok, Pamd, PamdOptions};
use serde_json::Value;

const TREE: &str = r#"apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {}
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
metadata: {name: cart, project: web}
spec: {title: Cart, parent: checkout}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart-ui, project: web}
spec: {type: subtask, title: Cart UI, parent: cart}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: pay, project: web}
spec: {title: Payment, parent: checkout}
---
apiVersion: pam.dev/v1
kind: Host
metadata: {name: box-a}
spec: {platform: linux, capacity: 2}
"#;

fn get(pamd: &Pamd, kind: &str, name: &str) -> Value {
    serde_json::from_str(&ok(
        &pamd.pamctl(&["get", kind, name, "-p", "web", "-o", "json"])
    ))
    .unwrap()
}

fn phase(pamd: &Pamd, name: &str) -> String {
    get(pamd, "task", name)["status"]["phase"]
        .as_str()
        .unwrap()
        .to_string()
}

fn events(pamd: &Pamd, topic: &str) -> Vec<String> {
    ok(&pamd.pamctl(&["events", "--topic", topic]))
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn task_verbs_and_cancel_cascade() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    let out = ok(&pamd.pamctl(&["task", "start", "pay", "-p", "web"]));
    assert_eq!(out, "task.pam.dev/pay doing\n");
    let out = ok(&pamd.pamctl(&["task", "done", "pay", "-p", "web"]));
    assert_eq!(out, "task.pam.dev/pay done\n");
    assert_eq!(phase(&pamd, "pay"), "done");
    ok(&pamd.pamctl(&["task", "start", "cart", "-p", "web"]));

    // Cancelling checkout cascades to its non-done descendants; without a
    // terminal it needs --yes and changes nothing.
    let err = fails(
        &pamd.pamctl(&["task", "cancel", "checkout", "-p", "web"]),
        2,
    );
    assert!(err.contains("also cancels 2 descendant(s)"), "{err}");
    assert!(err.contains("cart") && err.contains("cart-ui"), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(phase(&pamd, "checkout"), "todo");
    let before = events(&pamd, "work_item.status_changed").len();
    let out = ok(&pamd.pamctl(&["task", "cancel", "checkout", "-p", "web", "--yes"]));
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "task.pam.dev/cart cancelled (cascade)",
            "task.pam.dev/cart-ui cancelled (cascade)",
            "task.pam.dev/checkout cancelled",
        ]
    );
    for (name, want) in [
        ("checkout", "cancelled"),
        ("cart", "cancelled"),
        ("cart-ui", "cancelled"),
        ("pay", "done"),
        ("launch", "todo"),
    ] {
        assert_eq!(phase(&pamd, name), want, "{name}");
    }
    assert_eq!(
        events(&pamd, "work_item.status_changed").len(),
        before + 3,
        "one status_changed per cancelled item"
    );
    // cancelled → done is illegal: refused (3) with the gate's message.
    let err = fails(&pamd.pamctl(&["task", "done", "cart", "-p", "web"]), 3);
    assert!(err.contains("illegal"), "{err}");
    assert!(err.contains("cancelled → done"), "{err}");
    assert_eq!(phase(&pamd, "cart"), "cancelled");
    // reopen brings a task back to todo.
    let out = ok(&pamd.pamctl(&["task", "reopen", "cart", "-p", "web"]));
    assert_eq!(out, "task.pam.dev/cart todo\n");
    assert_eq!(phase(&pamd, "cart"), "todo");
    assert_eq!(
        phase(&pamd, "cart-ui"),
        "cancelled",
        "reopen does not cascade"
    );
    // Unknown task: refused, 3.
    let err = fails(&pamd.pamctl(&["task", "done", "nope", "-p", "web"]), 3);
    assert!(err.contains("404") || err.contains("not found"), "{err}");
}

#[tokio::test]
async fn reparent_rewrites_the_subtree_paths_and_journals_once() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    let path = |name: &str| {
        get(&pamd, "task", name)["status"]["path"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let uid8 = |name: &str| {
        get(&pamd, "task", name)["metadata"]["uid"]
            .as_str()
            .unwrap()[..8]
            .to_string()
    };
    let (launch, checkout) = (path("launch"), path("checkout"));
    assert_eq!(path("cart"), format!("{checkout}/{}", uid8("cart")));
    assert!(events(&pamd, "work_item.reparented").is_empty());
    // Move cart (and with it cart-ui) from checkout to the milestone.
    let moved = TREE.replace(
        "spec: {title: Cart, parent: checkout}",
        "spec: {title: Cart, parent: launch}",
    );
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&moved)));
    assert!(out.contains("task.pam.dev/cart configured\n"), "{out}");
    assert_eq!(out.matches(" configured").count(), 1, "{out}");
    let cart = format!("{launch}/{}", uid8("cart"));
    assert_eq!(path("cart"), cart);
    assert_eq!(path("cart-ui"), format!("{cart}/{}", uid8("cart-ui")));
    assert_eq!(path("checkout"), checkout, "the old parent is untouched");
    let ev = events(&pamd, "work_item.reparented");
    assert_eq!(ev.len(), 1, "exactly one event for the subtree: {ev:?}");
    assert!(
        ev[0].contains("cart"),
        "the event names the moved task: {ev:?}"
    );
    // Applying the same again: unchanged, still one event.
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&moved)));
    assert!(out.lines().all(|l| l.ends_with(" unchanged")), "{out}");
    assert_eq!(events(&pamd, "work_item.reparented").len(), 1);
    // Back to the top level (no parent).
    let top = moved.replace("spec: {title: Cart, parent: launch}", "spec: {title: Cart}");
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&top)));
    assert_eq!(path("cart"), uid8("cart"));
    assert_eq!(
        path("cart-ui"),
        format!("{}/{}", uid8("cart"), uid8("cart-ui"))
    );
    assert_eq!(events(&pamd, "work_item.reparented").len(), 2);
}

#[tokio::test]
async fn host_disable_and_enable() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    let host_phase = || {
        let h: Value =
            serde_json::from_str(&ok(&pamd.pamctl(&["get", "host", "box-a", "-o", "json"])))
                .unwrap();
        h["status"]["phase"].as_str().unwrap().to_string()
    };
    assert_eq!(host_phase(), "registered");
    assert_eq!(
        ok(&pamd.pamctl(&["host", "disable", "box-a"])),
        "host.pam.dev/box-a disabled\n"
    );
    assert_eq!(host_phase(), "disabled");
    // Aliases work for hosts too.
    let out = ok(&pamd.pamctl(&["get", "ho", "-o", "name"]));
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(
        ok(&pamd.pamctl(&["host", "enable", "box-a"])),
        "host.pam.dev/box-a enabled\n"
    );
    assert_eq!(host_phase(), "registered", "never seen: back to registered");
    let err = fails(&pamd.pamctl(&["host", "disable", "nope"]), 3);
    assert!(err.contains("nope"), "{err}");
}

#[tokio::test]
async fn unauthenticated_unknown_and_revoked_tokens_are_refused() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    // No token at all (and no admin.token to fall back on).
    let err = fails(&pamd.pamctl_as(None, &["get", "projects"], None), 3);
    assert!(err.contains("401"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    // A token pamd never issued.
    let err = fails(
        &pamd.pamctl_as(Some("pam_not_a_real_token"), &["get", "projects"], None),
        3,
    );
    assert!(err.contains("401"), "{err}");
    // Writes are refused too, and nothing is written.
    let err = fails(&pamd.pamctl_as(None, &["apply", "-f", "-"], Some(TREE)), 3);
    assert!(err.contains("401"), "{err}");
    assert_eq!(ok(&pamd.pamctl(&["get", "projects", "-o", "name"])), "");

    // An operator token works until it is revoked, then is refused at once.
    let created = pamd.pamctl(&["token", "create", "ci"]);
    let token = ok(&created).trim().to_string();
    let note = String::from_utf8_lossy(&created.stderr).to_string();
    let id = note
        .split("(id ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("no id in {note:?}"))
        .to_string();
    assert!(
        !note.contains(&token),
        "the token is printed on stdout only"
    );
    ok(&pamd.pamctl_as(Some(&token), &["apply", "-f", "-"], Some(TREE)));
    assert_eq!(
        ok(&pamd.pamctl_as(Some(&token), &["get", "projects", "-o", "name"], None)),
        "project/web\n"
    );
    let list = ok(&pamd.pamctl(&["token", "list"]));
    assert!(list.contains("ci"), "{list}");
    assert!(!list.contains(&token), "tokens are never listed");
    assert_eq!(
        ok(&pamd.pamctl(&["token", "revoke", &id])),
        format!("token {id} revoked\n")
    );
    let err = fails(&pamd.pamctl_as(Some(&token), &["get", "projects"], None), 3);
    assert!(err.contains("401"), "{err}");
    assert!(err.contains("revoked"), "{err}");
    // The admin token is unaffected.
    ok(&pamd.pamctl(&["get", "projects"]));
}
