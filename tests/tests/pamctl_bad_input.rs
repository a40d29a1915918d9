//! Every bad-input case of a manifest through `pamctl apply` against a real
//! pamd: each error names the file, document index, line, column, field
//! path and what was expected; one bad document means nothing of the batch
//! is written.

use std::path::Path;

use pam_tests::{fails, ok, Pamd, PamdOptions};

/// A valid Project as document 0 of every bad file: it must not be written
/// either.
const HEADER: &str = "apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {}
---
";

fn task(extra_meta: &str, spec: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: a\n  project: web\n{extra_meta}spec:\n{spec}"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Applies `text` from a file, asserts exit 3 and that stderr has
/// `error: <file>: <expected>`; returns stderr.
fn refused(pamd: &Pamd, dir: &Path, name: &str, text: &str, expected: &str) -> String {
    let f = write(dir, name, text);
    let err = fails(&pamd.pamctl(&["apply", "-f", &f]), 3);
    let want = format!("error: {f}: {}", expected.replace("{file}", &f));
    assert!(err.contains(&want), "{name}: expected\n  {want}\nin\n{err}");
    assert!(err.contains("422"), "{err}");
    err
}

#[tokio::test]
async fn malformed_documents_are_positioned_errors_and_nothing_is_written() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown-field.yaml",
            task("", "  title: A\n  colour: red\n"),
            "document 1, line 13, column 3: spec.colour: unknown field, expected one of `type`, `title`, `description`, `parent`, `dependsOn`, `status`, `assignee`, `sortOrder`",
        ),
        (
            "wrong-type.yaml",
            task("", "  title: A\n  sortOrder: many\n"),
            "document 1, line 13, column 14: spec.sortOrder: invalid type: string \"many\", expected i32",
        ),
        (
            "bad-enum.yaml",
            task("", "  title: A\n  type: story\n"),
            "document 1, line 13, column 9: spec.type: unknown variant `story`, expected one of `milestone`, `epic`, `task`, `subtask`",
        ),
        (
            "missing-required.yaml",
            task("", "  type: task\n"),
            "document 1, line 11, column 1: spec.title: missing required field, expected a value",
        ),
        (
            "bad-name.yaml",
            task("", "  title: A\n").replace("name: a", "name: Bad_Name"),
            "document 1, line 9, column 9: metadata.name: invalid name \"Bad_Name\", expected a DNS label",
        ),
        (
            "duplicate.yaml",
            format!("{}---\n{}", task("", "  title: A\n"), task("", "  title: A2\n")),
            "document 2, line 17, column 9: metadata.name: duplicate Task \"a\" in project \"web\" (first in {file} document 1), expected each (kind, project, name) once per batch",
        ),
    ];
    for (name, body, expected) in &cases {
        refused(&pamd, dir, name, &format!("{HEADER}{body}"), expected);
    }
    // Several problems in one batch: each reported.
    let many = format!(
        "{HEADER}{}---\n{}",
        task("", "  title: A\n  colour: red\n"),
        task("", "  type: story\n").replace("name: a", "name: b")
    );
    let err = refused(
        &pamd,
        dir,
        "many.yaml",
        &many,
        "document 1, line 13, column 3: spec.colour: unknown field",
    );
    assert!(err.contains("document 2, line "), "{err}");
    assert!(err.contains("spec.type: unknown variant `story`"), "{err}");
    // Nothing of any batch was written, not even the valid Project.
    assert_eq!(ok(&pamd.pamctl(&["get", "projects", "-o", "name"])), "");
    assert_eq!(ok(&pamd.pamctl(&["events"])), "");
    // The same content without the bad document applies. A status block
    // is not an error through pamctl: like kubectl, it drops what `get`
    // prints but a manifest must not carry (pamd's own refusal
    // is the loader's and the API's to test).
    let good = format!(
        "{HEADER}{}status:\n  phase: done\n",
        task("", "  title: A\n")
    );
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&good)));
    assert_eq!(
        out,
        "project.pam.dev/web created\nweb/task.pam.dev/a created\n"
    );
}

const STORED: &str = "apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {}
---
apiVersion: pam.dev/v1
kind: Project
metadata: {name: other}
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
metadata: {name: elsewhere, project: other}
spec: {title: Elsewhere}
";

fn doc_task(name: &str, project: &str, spec: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {name}, project: {project}}}\nspec: {{{spec}}}\n")
}

fn doc_run(name: &str, project: &str, task: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {name}, project: {project}}}\nspec: {{task: {task}, provider: claude, prompt: go, cwd: /tmp}}\n")
}

#[tokio::test]
async fn batch_rules_refuse_the_whole_batch() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(STORED)));
    let state = || {
        (
            ok(&pamd.pamctl(&["get", "tasks", "-A", "-o", "json"])),
            ok(&pamd.pamctl(&["get", "runs", "-A", "-o", "name"])),
            ok(&pamd.pamctl(&["events"])).lines().count(),
        )
    };
    let before = state();
    // A valid new task first in every batch: it must not be written.
    let fresh = doc_task("fresh", "web", "title: Fresh");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            // The other project and its task are in the batch.
            "other-project-parent.yaml",
            format!(
                "{}---\n{}",
                doc_task("x", "web", "title: X, parent: there"),
                doc_task("there", "other", "title: There")
            ),
            "document 1, line 9, column 26: spec.parent: task \"there\" is in project \"other\", expected a task in project \"web\"",
        ),
        (
            // The other project's task is stored, and the batch does not
            // name that project: the error still names it.
            "stored-other-project-parent.yaml",
            doc_task("x", "web", "title: X, parent: elsewhere"),
            "document 1, line 9, column 26: spec.parent: task \"elsewhere\" is in project \"other\", expected a task in project \"web\"",
        ),
        (
            "self-parent.yaml",
            doc_task("x", "web", "title: X, parent: x"),
            "document 1, line 9, column 26: spec.parent: task \"x\" is its own parent, expected another task's name or no parent",
        ),
        (
            "cycle.yaml",
            format!(
                "{}---\n{}",
                doc_task("x", "web", "title: X, parent: y"),
                doc_task("y", "web", "title: Y, parent: x")
            ),
            "document 1, line 9, column 26: spec.parent: parent \"y\" makes a cycle x → y → x, expected a parent that is not \"x\" or one of its descendants",
        ),
        (
            // OQ-6: the cycle only exists after the reparent of a stored task.
            "cycle-by-reparent.yaml",
            doc_task("launch", "web", "type: milestone, title: Launch, parent: cart-ui"),
            "document 1, line 9, column 48: spec.parent: parent \"cart-ui\" makes a cycle launch → cart-ui → cart → checkout → launch, expected a parent that is not \"launch\" or one of its descendants",
        ),
        (
            // A Run's task stored in a project the batch does not name.
            "run-on-other-project-task.yaml",
            doc_run("r1", "web", "elsewhere"),
            "document 1, line 9, column 14: spec.task: task \"elsewhere\" is in project \"other\", expected a task in project \"web\"",
        ),
        (
            "run-on-milestone.yaml",
            doc_run("r1", "web", "launch"),
            "document 1, line 9, column 14: spec.task: task \"launch\" is a milestone, expected a task or subtask (runs execute tasks and subtasks only)",
        ),
        (
            "run-on-epic.yaml",
            doc_run("r1", "web", "checkout"),
            "document 1, line 9, column 14: spec.task: task \"checkout\" is an epic, expected a task or subtask (runs execute tasks and subtasks only)",
        ),
    ];
    for (name, body, expected) in &cases {
        refused(&pamd, dir, name, &format!("{fresh}---\n{body}"), expected);
        assert_eq!(state(), before, "{name}: nothing of the batch was written");
    }

    // Archived project: no new Task, no new Run; existing ones still apply.
    let archive =
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {archived: true}\n";
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(archive)));
    assert_eq!(out, "project.pam.dev/web configured\n");
    let before = state();
    refused(
        &pamd,
        dir,
        "archived-task.yaml",
        &fresh,
        "document 0, line 3, column 34: metadata.project: project \"web\" is archived and takes no new Task, expected an active project (set spec.archived: false on the Project first)",
    );
    refused(
        &pamd,
        dir,
        "archived-run.yaml",
        &doc_run("r1", "web", "cart"),
        "document 0, line 3, column 31: metadata.project: project \"web\" is archived and takes no new Run, expected an active project (set spec.archived: false on the Project first)",
    );
    assert_eq!(state(), before);
    let out = ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&doc_task(
            "cart",
            "web",
            "title: Cart renamed, parent: checkout",
        )),
    ));
    assert_eq!(
        out, "web/task.pam.dev/cart configured\n",
        "stored tasks still apply"
    );
    // Un-archiving (in the same batch) restores.
    let unarchived = format!(
        "{}---\n{fresh}---\n{}",
        archive.replace("archived: true", "archived: false"),
        doc_run("r1", "web", "cart")
    );
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&unarchived)));
    assert_eq!(
        out,
        "project.pam.dev/web configured\nweb/task.pam.dev/fresh created\nweb/run.pam.dev/r1 created\n"
    );
}

/// pamctl's half of the hostile-input suite: hostile input on the command line
/// and in files ends in a refusal with an `error:` line and a documented exit
/// code (1 validation, 2 usage, 3 refused by pamd), never a crash (a signal, a
/// stack overflow), a 5xx (exit 5) or a hang; and nothing is written.
#[tokio::test]
async fn hostile_arguments_and_files_are_refused_not_crashed() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(HEADER.trim_end_matches("---\n")),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let deep = |n: usize| {
        format!("{HEADER}apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: a, project: web}}\nspec: {{title: A}}\nx:\n{}a\n", "- ".repeat(n))
    };
    let mut bomb = format!("{HEADER}apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: a, project: web}}\nspec: {{title: A}}\nx:\n  a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
    for w in ["a", "b", "c", "d", "e", "f", "g", "h", "i"].windows(2) {
        bomb.push_str(&format!(
            "  {}: &{} [{}]\n",
            w[1],
            w[1],
            vec![format!("*{}", w[0]); 10].join(",")
        ));
    }
    let files = [
        ("deep.yaml", deep(5_000)),
        ("deeper.yaml", deep(100_000)),
        ("laughs.yaml", bomb),
        ("nul.yaml", task("", "  title: \"a\\0b\"\n")),
        (
            "title.yaml",
            task("", &format!("  title: {}\n", "t".repeat(600))),
        ),
        (
            "labels.yaml",
            task(
                &format!(
                    "  labels:\n{}",
                    (0..200)
                        .map(|i| format!("    k{i}: v\n"))
                        .collect::<String>()
                ),
                "  title: A\n",
            ),
        ),
    ];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for (name, text) in &files {
        let f = write(dir, name, text);
        for verb in ["apply", "validate", "diff"] {
            cases.push(vec![verb.into(), "-f".into(), f.clone()]);
        }
    }
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    cases.push(s(&["token", "create", &"n".repeat(100)]));
    cases.push(s(&["token", "create", "a\nb"]));
    cases.push(s(&["token", "revoke", "not-a-uuid"]));
    cases.push(s(&["get", "tasks", "-A", "-l", "Bad Key!=x"]));
    cases.push(s(&["get", "project", &"p".repeat(10_000)]));
    cases.push(s(&["get", "task", "-p", "web", "no-such-task"]));
    let before = ok(&pamd.pamctl(&["events"]));
    for args in &cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let out = pamd.pamctl(&argv);
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        let what = format!(
            "pamctl {}",
            argv.join(" ").chars().take(100).collect::<String>()
        );
        assert!(
            matches!(out.status.code(), Some(1..=3)),
            "{what}: exit {:?}\n{err}",
            out.status
        );
        assert!(err.contains("error"), "{what}: no error line:\n{err}");
        assert!(
            took < std::time::Duration::from_secs(5),
            "{what}: took {took:?}"
        );
    }
    assert_eq!(
        ok(&pamd.pamctl(&["events"])),
        before,
        "a refused command wrote something"
    );
    assert!(cases.len() >= 20, "{}", cases.len());
}

/// `spec.dependsOn` is validated with the whole batch. A cycle
/// (of 2, of 5 across two files) names every link with its file and line;
/// an unknown or cross-project name is positioned at its list entry;
/// nothing of the batch is written.
#[tokio::test]
async fn bad_dependencies_are_refused_with_file_and_line_and_nothing_is_written() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let dep_task = |name: &str, project: &str, deps: &[&str]| {
        format!(
            "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: {project}\nspec:\n  title: {name}\n  dependsOn:\n{}",
            deps.iter().map(|d| format!("  - {d}\n")).collect::<String>()
        )
    };
    let root = |name: &str, project: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: {project}\nspec:\n  title: {name}\n")
    };
    // A cycle of two.
    let two = format!(
        "{HEADER}{}---\n{}",
        dep_task("a", "web", &["b"]),
        dep_task("b", "web", &["a"])
    );
    refused(
        &pamd,
        dir,
        "two.yaml",
        &two,
        "document 1, line 14, column 5: spec.dependsOn[0]: dependsOn makes a cycle a → b → a, expected dependencies without a cycle; links: a → b ({file}:14), b → a ({file}:24)",
    );
    // A cycle of five across two files.
    let one_f = write(
        dir,
        "five-1.yaml",
        &format!(
            "{HEADER}{}---\n{}",
            dep_task("t1", "web", &["t2"]),
            dep_task("t2", "web", &["t3"])
        ),
    );
    let two_f = write(
        dir,
        "five-2.yaml",
        &[
            dep_task("t3", "web", &["t4"]),
            dep_task("t4", "web", &["t5"]),
            dep_task("t5", "web", &["t1"]),
        ]
        .join("---\n"),
    );
    let err = fails(&pamd.pamctl(&["apply", "-f", &one_f, "-f", &two_f]), 3);
    let want = format!(
        "error: {one_f}: document 1, line 14, column 5: spec.dependsOn[0]: dependsOn makes a cycle t1 → t2 → t3 → t4 → t5 → t1, expected dependencies without a cycle; links: t1 → t2 ({one_f}:14), t2 → t3 ({one_f}:24), t3 → t4 ({two_f}:9), t4 → t5 ({two_f}:19), t5 → t1 ({two_f}:29)"
    );
    assert!(err.contains(&want), "expected\n  {want}\nin\n{err}");
    assert_eq!(
        err.matches("makes a cycle").count(),
        1,
        "one error per cycle: {err}"
    );
    // An unknown name and another project's task.
    let other = HEADER.replace("name: web", "name: api");
    let bad = format!(
        "{HEADER}{other}{}---\n{}",
        root("lib", "api"),
        dep_task("a", "web", &["ghost", "lib"])
    );
    let err = refused(
        &pamd,
        dir,
        "names.yaml",
        &bad,
        "document 3, line 27, column 5: spec.dependsOn[0]: no task \"ghost\" in project \"web\", expected the name of a Task in this batch or already stored in project \"web\"",
    );
    let f = dir.join("names.yaml").display().to_string();
    assert!(
        err.contains(&format!("error: {f}: document 3, line 28, column 5: spec.dependsOn[1]: task \"lib\" is in project \"api\", expected a task in project \"web\" (dependencies stay within a project)")),
        "{err}"
    );
    // Nothing of any batch was written.
    assert_eq!(ok(&pamd.pamctl(&["get", "projects", "-o", "name"])), "");
    assert_eq!(ok(&pamd.pamctl(&["events"])), "");
    // The chain without its closing link applies.
    let fine = format!(
        "{HEADER}{}---\n{}",
        root("a", "web"),
        dep_task("b", "web", &["a"])
    );
    let f = write(dir, "fine.yaml", &fine);
    ok(&pamd.pamctl(&["apply", "-f", &f]));
}

/// A Source's git URL that would make git run a command — a
/// `<transport>::` form in any case, a leading space, `fd::`, a host
/// starting with '-' — is refused at its line, and nothing of the batch
/// is written.
#[tokio::test]
async fn git_urls_that_run_commands_are_refused_at_their_line() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let source = |url: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: repo}}\nspec:\n  projects: [web]\n  git:\n    url: {url:?}\n")
    };
    let cases = [
        (
            "EXT::sh -c touch% /tmp/pwned",
            "the EXT:: transport runs a remote helper",
        ),
        (
            " ext::sh -c touch% /tmp/pwned",
            "has leading or trailing whitespace",
        ),
        ("fd::3", "the fd:: transport runs a remote helper"),
        (
            "ssh://-oProxyCommand=touch% /tmp/pwned/r.git",
            "the host or user starts with '-'",
        ),
        ("-oProxyCommand=x@host:r.git", "starts with '-'"),
    ];
    for (i, (url, want)) in cases.iter().enumerate() {
        refused(
            &pamd,
            tmp.path(),
            &format!("source-{i}.yaml"),
            &format!("{HEADER}{}", source(url)),
            &format!("document 1, line 12, column 10: spec.git.url: {want}"),
        );
    }
    // A push receiver's secret outside the Source's projects,
    // with a bad key, or on a directory Source.
    let receiver = |spec: &str| {
        format!("{HEADER}apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: repo}}\nspec:\n  projects: [web]\n{spec}")
    };
    let cases = [
        (
            "  git: {url: 'https://example.com/r.git'}\n  receiver:\n    secretRef: {project: api, name: hook, key: token}\n",
            "document 1, line 13, column 26: spec.receiver.secretRef.project: \"api\" is not one of spec.projects",
        ),
        (
            "  git: {url: 'https://example.com/r.git'}\n  receiver:\n    secretRef: {project: web, name: hook, key: 'a b'}\n",
            "document 1, line 13, column 48: spec.receiver.secretRef.key: invalid key \"a b\"",
        ),
        (
            "  path: /srv/pam\n  receiver:\n    secretRef: {project: web, name: hook, key: token}\n",
            "document 1, line 12, column 3: spec.receiver: a push receiver needs spec.git",
        ),
        (
            "  git: {url: 'https://example.com/r.git'}\n  substitute:\n    vars: {9LIVES: x}\n",
            "document 1, line 13, column 5: spec.substitute.vars: \"9LIVES\" is not a variable name",
        ),
        (
            "  git: {url: 'https://example.com/r.git'}\n  substitute:\n    fromSecrets: [{project: api, name: vars}]\n",
            "document 1, line 13, column 18: spec.substitute.fromSecrets: Secret \"vars\" of project \"api\": not one of spec.projects",
        ),
        (
            "  git: {url: 'https://example.com/r.git'}\n  substitute:\n    fromProjects: [api]\n",
            "document 1, line 13, column 19: spec.substitute.fromProjects: \"api\" is not one of spec.projects",
        ),
    ];
    for (i, (spec, want)) in cases.iter().enumerate() {
        refused(
            &pamd,
            tmp.path(),
            &format!("receiver-{i}.yaml"),
            &receiver(spec),
            want,
        );
    }
    assert_eq!(ok(&pamd.pamctl(&["get", "sources", "-o", "name"])), "");
    assert_eq!(ok(&pamd.pamctl(&["get", "projects", "-o", "name"])), "");
    assert_eq!(ok(&pamd.pamctl(&["events"])), "");
}

/// A repository URL with credentials or a command-running
/// transport, a ref or branch git would read as an option or refuse, a
/// run with both a workspace and a cwd, a workspace in a project without
/// a repository: refused at their line, nothing written, no git run.
#[tokio::test]
async fn bad_repositories_and_workspaces_are_refused_at_their_line() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = |repo: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: web}}\nspec:\n  repository:\n{repo}---\n")
    };
    let good = project("    url: file:///srv/web.git\n");
    let run = |ws: &str| {
        format!("{}---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: r1, project: web}}\nspec:\n  task: a\n  provider: exec\n  command: [\"true\"]\n{ws}", task("", "  title: A\n"))
    };
    let cases = [
        (
            project("    url: https://me:tok@example.com/web.git\n"),
            "document 0, line 6, column 10: spec.repository.url: holds a password or token",
        ),
        (
            project("    url: \"ext::sh -c touch% /tmp/pwned\"\n"),
            "document 0, line 6, column 10: spec.repository.url: the ext:: transport runs a remote helper",
        ),
        (
            project("    url: file:///srv/web.git\n    defaultRef: \"--upload-pack=x\"\n"),
            "document 0, line 7, column 17: spec.repository.defaultRef: starts with '-'",
        ),
        (
            project("    url: https://example.com/web.git\n    secretRef:\n      name: creds\n      passwordKey: \"a b\"\n"),
            "document 0, line 9, column 20: spec.repository.secretRef.passwordKey: invalid key \"a b\"",
        ),
        (
            format!("{good}{}", run("  workspace:\n    ref: \"-b\"\n")),
            "document 2, line 24, column 10: spec.workspace.ref: starts with '-'",
        ),
        (
            format!("{good}{}", run("  workspace:\n    branch: \"a..b\"\n")),
            "document 2, line 24, column 13: spec.workspace.branch: holds '..'",
        ),
        (
            format!("{good}{}", run("  cwd: /srv\n  workspace: {}\n")),
            "document 2, line 23, column 8: spec.cwd: a run with a workspace gets its worktree as cwd",
        ),
        (
            format!("{HEADER}{}", run("  workspace: {}\n")),
            "document 2, line 21, column 3: spec.workspace: a workspace is a worktree of the project's repository, and project \"web\" has none",
        ),
        (
            format!("{good}{}", run("")),
            "document 2, line 19, column 1: spec.cwd: missing: the run has no cwd, no workspace",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        refused(&pamd, tmp.path(), &format!("ws-{i}.yaml"), text, want);
    }
    assert_eq!(ok(&pamd.pamctl(&["get", "projects", "-o", "name"])), "");
    assert_eq!(ok(&pamd.pamctl(&["events"])), "");
}
