//! Workspaces at apply: a Project's repository, a Run's or Task's
//! workspace — refused with file:line when git would misread them, when
//! a run has both a workspace and a cwd, or a workspace and a project
//! without a repository; a run with neither cwd nor workspace takes its
//! task's.

use pam_manifests::load::{parse_documents, Document};
use pam_manifests::names::Name;
use pam_manifests::state::WorkItemKind;
use pam_manifests::validate::{validate_batch, InMemoryState, StoredProject, StoredTask};

fn errors(files: &[(&str, &str)], existing: &InMemoryState) -> Vec<String> {
    let mut docs: Vec<Document> = Vec::new();
    let mut out = Vec::new();
    for (f, t) in files {
        match parse_documents(f, t) {
            Ok(d) => docs.extend(d),
            Err(e) => out.extend(e.iter().map(|e| e.to_string())),
        }
    }
    out.extend(
        validate_batch(&docs, existing)
            .iter()
            .map(|e| e.to_string()),
    );
    out
}

const PROJECT: &str = "\
apiVersion: pam.dev/v1
kind: Project
metadata:
  name: web
spec:
  repository:
    url: file:///srv/web.git
";

const TASK: &str = "\
apiVersion: pam.dev/v1
kind: Task
metadata:
  name: build
  project: web
spec:
  title: Build
";

const RUN: &str = "\
apiVersion: pam.dev/v1
kind: Run
metadata:
  name: r1
  project: web
spec:
  task: build
  provider: exec
  command: [sh, -c, 'echo hi >> notes.txt']
  workspace:
    ref: main
";

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

#[test]
fn a_workspace_run_of_a_project_with_a_repository_is_accepted() {
    let none = InMemoryState::default();
    assert_eq!(
        errors(
            &[("p.yaml", PROJECT), ("t.yaml", TASK), ("r.yaml", RUN)],
            &none
        ),
        Vec::<String>::new()
    );
    // Against stored objects too.
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: false });
    stored.repositories.insert(name("web"));
    stored.tasks.insert(
        (name("web"), name("build")),
        StoredTask {
            kind: WorkItemKind::Task,
            parent: None,
            depends_on: vec![],
        },
    );
    assert_eq!(errors(&[("r.yaml", RUN)], &stored), Vec::<String>::new());
}

#[test]
fn bad_urls_refs_and_branches_are_refused_at_their_line() {
    let none = InMemoryState::default();
    let cases = [
        (
            PROJECT.replace("file:///srv/web.git", "https://user:tok@example.com/web.git"),
            "p.yaml: document 0, line 7, column 10: spec.repository.url: holds a password or token",
        ),
        (
            PROJECT.replace("file:///srv/web.git", "'ext::sh -c touch% /tmp/x'"),
            "p.yaml: document 0, line 7, column 10: spec.repository.url: the ext:: transport runs a remote helper",
        ),
        (
            PROJECT.replace("file:///srv/web.git", "--upload-pack=touch /tmp/x"),
            "p.yaml: document 0, line 7, column 10: spec.repository.url: starts with '-'",
        ),
        (
            PROJECT.replace(
                "file:///srv/web.git",
                "file:///srv/web.git\n    defaultRef: '--orphan'",
            ),
            "p.yaml: document 0, line 8, column 17: spec.repository.defaultRef: starts with '-'",
        ),
    ];
    for (project, want) in cases {
        // Nothing of a bad file loads: the others then miss its project.
        let got = errors(&[("p.yaml", &project)], &none);
        assert!(
            got.len() == 1 && got[0].starts_with(want),
            "want {want:?}, got {got:#?}"
        );
    }
    let runs = [
        (
            RUN.replace("ref: main", "ref: '-b'"),
            "r.yaml: document 0, line 11, column 10: spec.workspace.ref: starts with '-'",
        ),
        (
            RUN.replace("ref: main", "ref: main\n    branch: 'a..b'"),
            "r.yaml: document 0, line 12, column 13: spec.workspace.branch: holds '..'",
        ),
        (
            RUN.replace("ref: main", "branch: x.lock"),
            "r.yaml: document 0, line 11, column 13: spec.workspace.branch: has a part starting with '.' or ending in '.lock'",
        ),
        (
            RUN.replace("ref: main", "ref: 'main^'"),
            "r.yaml: document 0, line 11, column 10: spec.workspace.ref: holds '^'",
        ),
    ];
    for (run, want) in runs {
        let got = errors(
            &[("p.yaml", PROJECT), ("t.yaml", TASK), ("r.yaml", &run)],
            &none,
        );
        assert!(
            got.len() == 1 && got[0].starts_with(want),
            "want {want:?}, got {got:#?}"
        );
    }
}

#[test]
fn a_workspace_and_a_cwd_are_refused_together() {
    let none = InMemoryState::default();
    let run = RUN.replace("  workspace:", "  cwd: /src\n  workspace:");
    assert_eq!(
        errors(&[("p.yaml", PROJECT), ("t.yaml", TASK), ("r.yaml", &run)], &none),
        ["r.yaml: document 0, line 10, column 8: spec.cwd: a run with a workspace gets its worktree as cwd, expected no cwd (or no workspace)"]
    );
}

#[test]
fn a_workspace_needs_a_repository() {
    let none = InMemoryState::default();
    let bare = PROJECT.replace("  repository:\n    url: file:///srv/web.git\n", "  {}\n");
    let bare = bare.replace("spec:\n  {}", "spec: {}");
    assert_eq!(
        errors(&[("p.yaml", &bare), ("t.yaml", TASK), ("r.yaml", RUN)], &none),
        ["r.yaml: document 0, line 10, column 3: spec.workspace: a workspace is a worktree of the project's repository, and project \"web\" has none; expected spec.repository on the Project"]
    );
    // Stored project without one: the same.
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: false });
    let got = errors(&[("t.yaml", TASK), ("r.yaml", RUN)], &stored);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].contains("spec.workspace: a workspace is a worktree"),
        "{got:#?}"
    );
    // A task's default workspace, too.
    let task = format!("{TASK}  workspace: {{}}\n");
    let got = errors(&[("p.yaml", &bare), ("t.yaml", &task)], &none);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with(
            "t.yaml: document 0, line 8, column 3: spec.workspace: a workspace is a worktree"
        ),
        "{got:#?}"
    );
}

#[test]
fn a_run_needs_a_cwd_a_workspace_or_its_tasks_workspace() {
    let none = InMemoryState::default();
    let bare_run = RUN.replace("  workspace:\n    ref: main\n", "");
    assert_eq!(
        errors(&[("p.yaml", PROJECT), ("t.yaml", TASK), ("r.yaml", &bare_run)], &none),
        ["r.yaml: document 0, line 6, column 1: spec.cwd: missing: the run has no cwd, no workspace, and its task \"build\" no default workspace; expected spec.cwd or spec.workspace"]
    );
    let task = format!("{TASK}  workspace:\n    fromAttempt: previous\n");
    assert_eq!(
        errors(
            &[
                ("p.yaml", PROJECT),
                ("t.yaml", &task),
                ("r.yaml", &bare_run)
            ],
            &none
        ),
        Vec::<String>::new()
    );
    // The stored task's default counts too.
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: false });
    stored.repositories.insert(name("web"));
    stored.tasks.insert(
        (name("web"), name("build")),
        StoredTask {
            kind: WorkItemKind::Task,
            parent: None,
            depends_on: vec![],
        },
    );
    assert_eq!(errors(&[("r.yaml", &bare_run)], &stored).len(), 1);
    stored.task_workspaces.insert((name("web"), name("build")));
    assert_eq!(
        errors(&[("r.yaml", &bare_run)], &stored),
        Vec::<String>::new()
    );
}

#[test]
fn workspace_defaults_are_printed() {
    let docs = parse_documents("r.yaml", RUN).unwrap();
    let spec = docs[0].manifest.spec_json();
    assert_eq!(
        spec["workspace"],
        serde_json::json!({"ref": "main", "fromAttempt": "fresh", "keep": "onFailure",
                           "autoCommit": true, "push": false})
    );
    assert!(spec.get("cwd").is_none(), "{spec}");
}
