//! The registry covers every kind. For each kind of
//! `pam_manifests::Kind::ALL` — a new kind is added here by the compiler
//! (the example below is a `match`) — the generic verbs work through the
//! real pamctl against a real pamd: apply, `get` by plural and short
//! name, `get -o json`, `describe`, `explain`, `api-resources`, shell
//! completion of the kind and of its objects' names, `apply --prune -l`
//! and `delete`.

use pam_manifests::Kind;
use pam_tests::{fails, ok, Pamd, PamdOptions};

/// What every kind's example needs: a project with a task and the Secret
/// a Webhook signs with.
const BASE: &str = "apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: build, project: web}
spec: {title: Build}
---
apiVersion: pam.dev/v1
kind: Secret
metadata: {name: hook-key, project: web}
spec:
  stringData: {signing: not-a-real-one}
";

/// One object of `kind` named `name`, labelled `set=kinds`.
fn example(kind: Kind, name: &str) -> String {
    let head = |project: bool| {
        format!(
            "apiVersion: pam.dev/v1\nkind: {kind}\nmetadata: {{name: {name},{} labels: {{set: kinds}}}}\n",
            if project { " project: web," } else { "" }
        )
    };
    match kind {
        Kind::Project => format!("{}spec: {{displayName: Example}}\n", head(false)),
        Kind::Task => format!("{}spec: {{title: Example}}\n", head(true)),
        Kind::Run => format!(
            "{}spec: {{task: build, provider: claude, prompt: hi, cwd: /tmp}}\n",
            head(true)
        ),
        Kind::Host => format!("{}spec: {{platform: linux}}\n", head(false)),
        Kind::Source => format!(
            "{}spec:\n  git: {{url: 'file:///nonexistent/{name}.git', ref: main}}\n  interval: 1h\n  projects: [web]\n",
            head(false)
        ),
        Kind::Webhook => format!(
            "{}spec:\n  url: https://ci.example.com/hooks/{name}\n  topics: [run.]\n  signingSecretRef: {{project: web, name: hook-key, key: signing}}\n",
            head(false)
        ),
        Kind::Secret => format!("{}spec:\n  stringData: {{K: v}}\n", head(true)),
        Kind::Schedule => format!(
            "{}spec:\n  schedule: \"30 2 * * *\"\n  suspend: true\n  runTemplate: {{task: build, provider: claude, prompt: hi, cwd: /tmp}}\n",
            head(true)
        ),
        Kind::Role => format!(
            "{}spec:\n  rules:\n  - {{verbs: [get, list], kinds: [runs], projects: [web]}}\n",
            head(false)
        ),
    }
}

#[tokio::test]
async fn every_kind_answers_the_generic_verbs() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    ok(&pamd.pamctl(&["apply", "-f", &write("base.yaml", BASE)]));
    let resources = ok(&pamd.pamctl(&["api-resources"]));
    let kinds_completed = ok(&pamd.pamctl(&["__complete", "get", ""]));
    // What `get` lists beyond the kinds is listed too.
    assert!(
        kinds_completed.lines().any(|l| l == "webhookdeliveries"),
        "{kinds_completed}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("webhookdeliveries ")),
        "{resources}"
    );

    for kind in Kind::ALL {
        let (singular, plural, short) = (kind.singular(), kind.plural(), kind.short());
        let scope: Vec<&str> = if kind.is_project_scoped() {
            vec!["-p", "web"]
        } else {
            vec![]
        };
        let pamctl = |args: &[&str]| pamd.pamctl(&[scope.as_slice(), args].concat());
        let what = format!("{kind}");

        // api-resources and completion know the kind.
        let line = resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(plural))
            .unwrap_or_else(|| panic!("{what}: not in api-resources:\n{resources}"));
        assert!(
            line.split_whitespace()
                .any(|w| w.split(',').any(|s| s == short)),
            "{what}: {line}"
        );
        assert!(line.contains(kind.as_str()), "{what}: {line}");
        assert!(
            kinds_completed
                .lines()
                .any(|l| l == plural || l == singular),
            "{what}: not completed:\n{kinds_completed}"
        );

        // apply, get by plural and short name, -o json, describe, explain.
        let file = write(&format!("{singular}.yaml"), &example(kind, "one"));
        let out = ok(&pamctl(&["apply", "-f", &file]));
        assert!(out.contains(" created"), "{what}: {out}");
        let listed = ok(&pamctl(&["get", plural, "-o", "name"]));
        assert!(
            listed.lines().any(|l| l.ends_with("/one")),
            "{what}: {listed}"
        );
        let json = ok(&pamctl(&["get", short, "one", "-o", "json"]));
        let obj: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(obj["kind"], kind.as_str(), "{what}: {json}");
        assert_eq!(obj["metadata"]["name"], "one", "{what}");
        assert_eq!(obj["metadata"]["labels"]["set"], "kinds", "{what}");
        let described = ok(&pamctl(&["describe", singular, "one"]));
        assert!(described.contains("one"), "{what}: {described}");
        let explained = ok(&pamd.pamctl(&["explain", singular]));
        assert!(explained.contains("spec"), "{what}: {explained}");
        let names =
            ok(&pamd.pamctl(&[&["__complete"], scope.as_slice(), &["get", singular, ""]].concat()));
        assert!(
            names.lines().any(|l| l == "one"),
            "{what}: names not completed:\n{names}"
        );

        // The one prune: `two` of the same set stays in the input, `one`
        // leaves it and is pruned.
        let two = write(&format!("{singular}-two.yaml"), &example(kind, "two"));
        ok(&pamctl(&["apply", "-f", &two]));
        let out = ok(&pamctl(&[
            "apply",
            "-f",
            &two,
            "--prune",
            "-l",
            "set=kinds",
        ]));
        assert!(
            out.lines().any(|l| l.contains("/one pruned")),
            "{what}: {out}"
        );
        fails(&pamctl(&["get", singular, "one"]), 3);

        // delete.
        let out = ok(&pamctl(&["delete", singular, "two"]));
        assert!(out.contains("two"), "{what}: {out}");
        fails(&pamctl(&["get", singular, "two"]), 3);
    }
}

/// A kubectl habit: `-n` names the project as `-p` does.
#[tokio::test]
async fn dash_n_is_the_project_as_in_kubectl() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.yaml");
    std::fs::write(&base, BASE).unwrap();
    ok(&pamd.pamctl(&["apply", "-f", &base.display().to_string()]));
    let by_p = ok(&pamd.pamctl(&["-p", "web", "get", "tasks", "-o", "name"]));
    let by_n = ok(&pamd.pamctl(&["get", "tasks", "-n", "web", "-o", "name"]));
    assert_eq!(by_n, by_p);
    assert!(by_n.contains("build"), "{by_n}");
}

/// A kubectl habit: contexts with a default project —
/// `config set-context`, `get-contexts`, `use-context`, `current-context`
/// — and a context's project used when no -p/-n is given.
#[tokio::test]
async fn contexts_carry_the_server_token_and_default_project() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.yaml");
    std::fs::write(&base, BASE).unwrap();
    ok(&pamd.pamctl(&["apply", "-f", &base.display().to_string()]));
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, &pamd.token).unwrap();
    let config = tmp.path().join("pam/config.yaml");
    // Only the config file tells pamctl where and who: no PAM_SERVER or
    // PAM_TOKEN.
    let pamctl = |args: &[&str]| {
        let mut cmd = pamd.isolated(&pam_tests::bin("pamctl"), None);
        cmd.env_remove("PAM_SERVER")
            .env("PAM_CONFIG", &config)
            .args(args)
            .output()
            .unwrap()
    };
    fails(&pamctl(&["config", "current-context"]), 1);
    let url = pamd.url.clone();
    let tf = token_file.display().to_string();
    let out = ok(&pamctl(&[
        "config",
        "set-context",
        "local",
        "--server",
        &url,
        "--token-file",
        &tf,
        "-p",
        "web",
    ]));
    assert!(out.contains("\"local\""), "{out}");
    assert_eq!(ok(&pamctl(&["config", "current-context"])).trim(), "local");
    ok(&pamctl(&[
        "config",
        "set-context",
        "other",
        "--server",
        "http://127.0.0.1:1",
    ]));
    let listed = ok(&pamctl(&["config", "get-contexts"]));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with('*') && l.contains("local") && l.contains("web")),
        "{listed}"
    );
    assert_eq!(
        ok(&pamctl(&["config", "get-contexts", "-o", "name"])),
        "local\nother\n"
    );
    // The context's project is the default of tasks and runs.
    let tasks = ok(&pamctl(&["get", "tasks", "-o", "name"]));
    assert!(tasks.contains("build"), "{tasks}");
    // Switching changes where pamctl goes; an unknown context is refused.
    ok(&pamctl(&["config", "use-context", "other"]));
    assert_eq!(ok(&pamctl(&["config", "current-context"])).trim(), "other");
    fails(&pamctl(&["config", "use-context", "nope"]), 2);
    ok(&pamctl(&["config", "use-context", "local"]));
    // set-context without a name changes the current context only.
    ok(&pamctl(&["config", "set-context", "-n", "elsewhere"]));
    let listed = ok(&pamctl(&["config", "get-contexts"]));
    assert!(listed.contains("elsewhere"), "{listed}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&config).unwrap().mode() & 0o777, 0o600);
}

/// A kubectl habit: `get all -p P` lists a project's objects of
/// every project-scoped kind.
#[tokio::test]
async fn get_all_lists_every_kind_of_a_project() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("all.yaml");
    let text = [
        BASE.to_string(),
        format!("---\n{}", example(Kind::Run, "r1")),
        format!("---\n{}", example(Kind::Schedule, "nightly")),
    ]
    .concat();
    std::fs::write(&p, text).unwrap();
    ok(&pamd.pamctl(&["apply", "-f", &p.display().to_string()]));
    let out = ok(&pamd.pamctl(&["get", "all", "-p", "web", "-o", "name"]));
    for want in [
        "task/build",
        "run/r1",
        "schedule/nightly",
        "secret/hook-key",
    ] {
        assert!(out.lines().any(|l| l.ends_with(want)), "{want}: {out}");
    }
}
