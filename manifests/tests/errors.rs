//! Every bad-input case of a manifest, each asserting the exact
//! one-line error: file, document index, line, column, field path and what
//! was expected.

use pam_manifests::load::{parse_documents, Document};
use pam_manifests::state::WorkItemKind;
use pam_manifests::validate::{validate_batch, InMemoryState, StoredProject, StoredTask};
use pam_manifests::Name;

/// The load errors of one file, as displayed.
fn load_errors(file: &str, text: &str) -> Vec<String> {
    match parse_documents(file, text) {
        Ok(docs) => panic!("{file} loaded {} documents, expected errors", docs.len()),
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

fn load(file: &str, text: &str) -> Vec<Document> {
    parse_documents(file, text).unwrap_or_else(|e| panic!("{e:#?}"))
}

/// The batch errors of several files, as displayed.
fn batch_errors(files: &[(&str, &str)], existing: &InMemoryState) -> Vec<String> {
    let docs: Vec<Document> = files.iter().flat_map(|(f, t)| load(f, t)).collect();
    validate_batch(&docs, existing)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

const PROJECT_WEB: &str = "\
apiVersion: pam.dev/v1
kind: Project
metadata:
  name: web
spec: {}
";

const RUN: &str = "\
apiVersion: pam.dev/v1
kind: Run
metadata:
  name: r1
  project: web
spec:
  task: build
  provider: claude
  prompt: go
  cwd: /src
  restartPolicy:
    maxAttempts: 3
";

#[test]
fn unknown_field() {
    let text = RUN.replace("  cwd: /src\n", "  cwd: /src\n  retries: 2\n");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 11, column 3: spec.retries: unknown field, expected one of `task`, `provider`, `providerVersion`, `prompt`, `cwd`, `workspace`, `target`, `restartPolicy`, `dispatchTimeoutSeconds`, `stopped`, `command`, `budget`, `env`, `envFrom`, `permissions`"]
    );
    let text = RUN.replace(
        "    maxAttempts: 3\n",
        "    maxAttempts: 3\n    backof: 5\n",
    );
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 13, column 5: spec.restartPolicy.backof: unknown field, expected one of `maxAttempts`, `backoffSeconds`, `backoffMaxSeconds`"]
    );
    let text = RUN.replace("kind: Run\n", "kind: Run\nextra: 1\n");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 3, column 1: extra: unknown field, expected one of `apiVersion`, `kind`, `metadata`, `spec`, `status`"]
    );
}

#[test]
fn wrong_type() {
    let text = RUN.replace("maxAttempts: 3", "maxAttempts: three");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 12, column 18: spec.restartPolicy.maxAttempts: invalid type: string \"three\", expected an integer from 1 to 2147483647"]
    );
    let text = RUN.replace("maxAttempts: 3", "maxAttempts: 0");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 12, column 18: spec.restartPolicy.maxAttempts: invalid value: integer `0`, expected an integer from 1 to 2147483647"]
    );
    // Past PostgreSQL's integer the value is refused with the
    // range, not stored as 2147483647.
    for (field, at) in [
        ("maxAttempts", 18),
        ("backoffSeconds", 21),
        ("backoffMaxSeconds", 24),
    ] {
        let text = RUN.replace("maxAttempts: 3", &format!("{field}: 4294967295"));
        let min = if field == "maxAttempts" { 1 } else { 0 };
        assert_eq!(
            load_errors("run.yaml", &text),
            [format!("run.yaml: document 0, line 12, column {at}: spec.restartPolicy.{field}: invalid value: integer `4294967295`, expected an integer from {min} to 2147483647")]
        );
    }
    let text = RUN.replace(
        "  cwd: /src\n",
        "  cwd: /src\n  dispatchTimeoutSeconds: 2147483648\n",
    );
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 11, column 27: spec.dispatchTimeoutSeconds: invalid value: integer `2147483648`, expected an integer from 1 to 2147483647"]
    );
    let text = RUN.replace("maxAttempts: 3", "maxAttempts: -1");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 12, column 18: spec.restartPolicy.maxAttempts: invalid value: integer `-1`, expected an integer from 1 to 2147483647"]
    );
    let text = RUN.replace("maxAttempts: 3", "maxAttempts: 2147483647");
    assert_eq!(
        load("run.yaml", &text).len(),
        1,
        "the largest integer is fine"
    );
    let text = RUN.replace("prompt: go", "prompt: [a, b]");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 9, column 11: spec.prompt: invalid type: sequence, expected a string"]
    );
}

/// A budget is non-negative numbers; anything else names the
/// file, line, column and field.
#[test]
fn bad_budgets() {
    let with = |budget: &str| format!("{RUN}  budget:\n{budget}");
    assert_eq!(
        load_errors("run.yaml", &with("    maxCostUsd: -1.5\n")),
        ["run.yaml: document 0, line 14, column 17: spec.budget.maxCostUsd: expected a non-negative number of US dollars, got -1.5"]
    );
    assert_eq!(
        load_errors("run.yaml", &with("    maxCostUsd: lots\n")),
        ["run.yaml: document 0, line 14, column 17: spec.budget.maxCostUsd: invalid type: string \"lots\", expected f64"]
    );
    assert_eq!(
        load_errors("run.yaml", &with("    maxTokens: -10\n")),
        ["run.yaml: document 0, line 14, column 16: spec.budget.maxTokens: invalid value: integer `-10`, expected u64"]
    );
    assert_eq!(
        load_errors("run.yaml", &with("    maxTokens: 1e3x\n")),
        ["run.yaml: document 0, line 14, column 16: spec.budget.maxTokens: invalid type: string \"1e3x\", expected u64"]
    );
    let ok = load(
        "run.yaml",
        &with("    maxCostUsd: 2\n    maxTokens: 5000\n"),
    );
    assert_eq!(ok.len(), 1);
    let project = PROJECT_WEB.replace("spec: {}", "spec:\n  budget:\n    maxTokens: -1");
    assert_eq!(
        load_errors("p.yaml", &project),
        ["p.yaml: document 0, line 7, column 16: spec.budget.maxTokens: invalid value: integer `-1`, expected u64"]
    );
}

#[test]
fn bad_enum_values() {
    let text = RUN.replace("provider: claude", "provider: gpt");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 8, column 13: spec.provider: unknown variant `gpt`, expected one of `claude`, `codex`, `gemini`, `grok`, `exec`"]
    );
    let task = "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: a\n  project: web\nspec:\n  type: story\n  title: A\n";
    assert_eq!(
        load_errors("t.yaml", task),
        ["t.yaml: document 0, line 7, column 9: spec.type: unknown variant `story`, expected one of `milestone`, `epic`, `task`, `subtask`"]
    );
    let text = RUN.replace("apiVersion: pam.dev/v1", "apiVersion: pam.dev/v2");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 1, column 13: apiVersion: unknown variant `pam.dev/v2`, expected `pam.dev/v1`"]
    );
    let text = RUN.replace("kind: Run", "kind: Job");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 2, column 7: kind: unknown kind \"Job\", expected one of `Project`, `Task`, `Run`, `Host`, `Source`, `Webhook`, `Secret`, `Schedule`, `Role`"]
    );
}

#[test]
fn missing_required_fields() {
    // A run without a cwd may take its task's workspace, so a
    // missing cwd is the batch's to refuse (see tests/workspaces.rs).
    let text = RUN.replace("  cwd: /src\n", "");
    assert_eq!(load("run.yaml", &text).len(), 1);
    let text = RUN.replace("  project: web\n", "");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 3, column 1: metadata.project: missing required field, expected a value"]
    );
    let text = RUN.replace("kind: Run\n", "");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 1, column 1: kind: missing required field, expected one of `Project`, `Task`, `Run`, `Host`, `Source`, `Webhook`, `Secret`, `Schedule`, `Role`"]
    );
    let exec = RUN.replace("provider: claude", "provider: exec");
    assert_eq!(
        load_errors("run.yaml", &exec),
        ["run.yaml: document 0, line 6, column 1: spec.command: missing required field for provider exec, expected the argv to run (a non-empty list)"]
    );
}

#[test]
fn names_must_be_dns_labels() {
    let text = RUN.replace("name: r1", "name: Build_API");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 4, column 9: metadata.name: invalid name \"Build_API\", expected a DNS label: 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"]
    );
    let text = RUN.replace("task: build", "task: -build");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 7, column 9: spec.task: invalid name \"-build\", expected a DNS label: 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"]
    );
    let text = RUN.replace(
        "  project: web\n",
        "  project: web\n  labels:\n    \"bad key!\": x\n",
    );
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 7, column 5: metadata.labels.bad key!: invalid label key \"bad key!\", expected an optional DNS-subdomain prefix and '/', then 1-63 characters of [A-Za-z0-9_.-] starting and ending with a letter or digit"]
    );
}

#[test]
fn status_and_server_set_metadata_are_refused() {
    let text = format!("{RUN}status:\n  phase: running\n");
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 13, column 1: status: status is observed state, set by the controller; expected no status in a manifest (remove the block)"]
    );
    let text = RUN.replace(
        "  project: web\n",
        "  project: web\n  uid: 6f1c2b1e-8d7a-4a57-9a3c-0d1f2e3a4b5c\n  resourceVersion: \"7\"\n",
    );
    assert_eq!(
        load_errors("run.yaml", &text),
        ["run.yaml: document 0, line 6, column 8: metadata.uid: set by the server; expected it absent in a manifest (only resourceVersion may be given)"]
    );
    let text = RUN.replace(
        "  project: web\n",
        "  project: web\n  resourceVersion: \"7\"\n",
    );
    assert_eq!(
        load("run.yaml", &text)[0].manifest.resource_version(),
        Some("7")
    );
}

#[test]
fn documents_are_counted_in_their_file_and_empty_ones_skipped() {
    let text = format!(
        "# leading comment\n---\n# only a comment\n---\n{PROJECT_WEB}---\n---\n{}",
        RUN.replace("cwd: /src", "cwd: 5")
    );
    assert_eq!(
        load_errors("multi.yaml", &text),
        ["multi.yaml: document 3, line 21, column 8: spec.cwd: invalid type: integer `5`, expected a string"]
    );
    let ok = format!("---\n# nothing\n---\n{PROJECT_WEB}---\n");
    let docs = load("multi.yaml", &ok);
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].index, 1);
}

#[test]
fn yaml_syntax_errors_have_positions() {
    let text = format!("{PROJECT_WEB}---\nkind: Task\nmetadata: [unclosed\n");
    let errors = load_errors("bad.yaml", &text);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0],
        "bad.yaml: document 1, line 9, column 1: invalid YAML: while parsing a flow sequence, expected ',' or ']'"
    );
    let dup =
        "apiVersion: pam.dev/v1\nkind: Project\nkind: Project\nmetadata: {name: a}\nspec: {}\n";
    assert_eq!(
        load_errors("dup.yaml", dup),
        ["dup.yaml: document 0, line 3, column 1: kind: duplicate key, expected each key once per mapping"]
    );
}

#[test]
fn one_bad_document_loads_nothing() {
    let text = format!(
        "{PROJECT_WEB}---\n{}",
        RUN.replace("provider: claude", "provider: gpt")
    );
    assert!(parse_documents("f.yaml", &text).is_err());
}

#[test]
fn flow_style_positions() {
    let text =
        "apiVersion: pam.dev/v1\nkind: Host\nmetadata: {name: h1}\nspec: {platform: windows}\n";
    assert_eq!(
        load_errors("h.yaml", text),
        ["h.yaml: document 0, line 4, column 18: spec.platform: unknown variant `windows`, expected `macos` or `linux`"]
    );
}

fn task(name: &str, project: &str, extra: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: {project}\nspec:\n  title: {name}\n{extra}")
}

fn run_for(task: &str) -> String {
    RUN.replace("task: build", &format!("task: {task}"))
}

#[test]
fn duplicates_in_one_batch() {
    let a = format!("{PROJECT_WEB}---\n{}", task("build", "web", ""));
    let b = format!("{}---\n{PROJECT_WEB}", task("build", "web", ""));
    assert_eq!(
        batch_errors(&[("a.yaml", &a), ("b.yaml", &b)], &InMemoryState::default()),
        [
            "b.yaml: document 0, line 4, column 9: metadata.name: duplicate Task \"build\" in project \"web\" (first in a.yaml document 1), expected each (kind, project, name) once per batch",
            "b.yaml: document 1, line 12, column 9: metadata.name: duplicate Project \"web\" (first in a.yaml document 0), expected each (kind, project, name) once per batch",
        ]
    );
    // Same name in another project or of another kind is fine.
    let c = format!(
        "{PROJECT_WEB}---\n{}---\n{}---\n{}---\n{}",
        PROJECT_WEB.replace("name: web", "name: api"),
        task("build", "web", ""),
        task("build", "api", ""),
        run_for("build").replace("name: r1", "name: build")
    );
    assert_eq!(
        batch_errors(&[("c.yaml", &c)], &InMemoryState::default()),
        Vec::<String>::new()
    );
}

#[test]
fn parent_in_another_project() {
    let text = format!(
        "{PROJECT_WEB}---\n{}---\n{}---\n{}",
        PROJECT_WEB.replace("name: web", "name: other"),
        task("build", "other", ""),
        task("deploy", "web", "  parent: build\n")
    );
    assert_eq!(
        batch_errors(&[("examples/app.yaml", &text)], &InMemoryState::default()),
        ["examples/app.yaml: document 3, line 28, column 11: spec.parent: task \"build\" is in project \"other\", expected a task in project \"web\""]
    );
    // Stored elsewhere, too.
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: false });
    stored
        .projects
        .insert(name("other"), StoredProject { archived: false });
    stored.tasks.insert(
        (name("other"), name("build")),
        StoredTask {
            kind: WorkItemKind::Task,
            parent: None,
            depends_on: vec![],
        },
    );
    let text = task("deploy", "web", "  parent: build\n");
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &stored),
        ["t.yaml: document 0, line 8, column 11: spec.parent: task \"build\" is in project \"other\", expected a task in project \"web\""]
    );
    let text = task("deploy", "web", "  parent: nowhere\n");
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &stored),
        ["t.yaml: document 0, line 8, column 11: spec.parent: no task \"nowhere\" in project \"web\", expected the name of a Task in this batch or already stored in project \"web\""]
    );
}

#[test]
fn self_parent() {
    let text = format!("{PROJECT_WEB}---\n{}", task("a", "web", "  parent: a\n"));
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &InMemoryState::default()),
        ["t.yaml: document 1, line 14, column 11: spec.parent: task \"a\" is its own parent, expected another task's name or no parent"]
    );
}

#[test]
fn cycles_at_any_depth() {
    // a → b → a, both in the batch: both documents report it.
    let text = format!(
        "{PROJECT_WEB}---\n{}---\n{}",
        task("a", "web", "  parent: b\n"),
        task("b", "web", "  parent: a\n")
    );
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &InMemoryState::default()),
        [
            "t.yaml: document 1, line 14, column 11: spec.parent: parent \"b\" makes a cycle a → b → a, expected a parent that is not \"a\" or one of its descendants",
            "t.yaml: document 2, line 23, column 11: spec.parent: parent \"a\" makes a cycle b → a → b, expected a parent that is not \"b\" or one of its descendants",
        ]
    );
    // Depth 4, and a task hanging below the loop is not itself blamed.
    let text = format!(
        "{PROJECT_WEB}---\n{}---\n{}---\n{}---\n{}---\n{}",
        task("a", "web", "  parent: d\n"),
        task("b", "web", "  parent: a\n"),
        task("c", "web", "  parent: b\n"),
        task("d", "web", "  parent: c\n"),
        task("leaf", "web", "  parent: d\n"),
    );
    let errors = batch_errors(&[("t.yaml", &text)], &InMemoryState::default());
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(errors[0].ends_with("spec.parent: parent \"d\" makes a cycle a → d → c → b → a, expected a parent that is not \"a\" or one of its descendants"), "{}", errors[0]);
}

#[test]
fn reparent_that_closes_a_loop_through_stored_tasks() {
    // Stored: root ← mid ← leaf. Reparenting root under leaf closes a loop
    // that only exists after the batch is applied.
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: false });
    for (t, parent) in [("root", None), ("mid", Some("root")), ("leaf", Some("mid"))] {
        stored.tasks.insert(
            (name("web"), name(t)),
            StoredTask {
                kind: WorkItemKind::Task,
                parent: parent.map(name),
                depends_on: vec![],
            },
        );
    }
    let text = task("root", "web", "  parent: leaf\n");
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &stored),
        ["t.yaml: document 0, line 8, column 11: spec.parent: parent \"leaf\" makes a cycle root → leaf → mid → root, expected a parent that is not \"root\" or one of its descendants"]
    );
    // Moving mid out from under root in the same batch breaks the loop.
    let fix = format!("{text}---\n{}", task("mid", "web", ""));
    assert_eq!(
        batch_errors(&[("t.yaml", &fix)], &stored),
        Vec::<String>::new()
    );
}

#[test]
fn runs_only_point_at_tasks_and_subtasks() {
    let text = format!(
        "{PROJECT_WEB}---\n{}---\n{}---\n{}---\n{}",
        task("m1", "web", "  type: milestone\n"),
        task("e1", "web", "  type: epic\n  parent: m1\n"),
        run_for("m1"),
        run_for("e1").replace("name: r1", "name: r2"),
    );
    assert_eq!(
        batch_errors(&[("r.yaml", &text)], &InMemoryState::default()),
        [
            "r.yaml: document 3, line 32, column 9: spec.task: task \"m1\" is a milestone, expected a task or subtask (runs execute tasks and subtasks only)",
            "r.yaml: document 4, line 45, column 9: spec.task: task \"e1\" is an epic, expected a task or subtask (runs execute tasks and subtasks only)",
        ]
    );
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: false });
    stored.tasks.insert(
        (name("web"), name("st")),
        StoredTask {
            kind: WorkItemKind::Subtask,
            parent: None,
            depends_on: vec![],
        },
    );
    stored.tasks.insert(
        (name("web"), name("ep")),
        StoredTask {
            kind: WorkItemKind::Epic,
            parent: None,
            depends_on: vec![],
        },
    );
    assert_eq!(
        batch_errors(&[("r.yaml", &run_for("st"))], &stored),
        Vec::<String>::new()
    );
    assert_eq!(
        batch_errors(&[("r.yaml", &run_for("ep"))], &stored),
        ["r.yaml: document 0, line 7, column 9: spec.task: task \"ep\" is an epic, expected a task or subtask (runs execute tasks and subtasks only)"]
    );
    assert_eq!(
        batch_errors(&[("r.yaml", &run_for("ghost"))], &stored),
        ["r.yaml: document 0, line 7, column 9: spec.task: no task \"ghost\" in project \"web\", expected the name of a task or subtask in this batch or already stored"]
    );
}

#[test]
fn no_new_tasks_or_runs_in_an_archived_project() {
    let mut stored = InMemoryState::default();
    stored
        .projects
        .insert(name("web"), StoredProject { archived: true });
    stored.tasks.insert(
        (name("web"), name("old")),
        StoredTask {
            kind: WorkItemKind::Task,
            parent: None,
            depends_on: vec![],
        },
    );
    let text = format!("{}---\n{}", task("new", "web", ""), run_for("old"));
    assert_eq!(
        batch_errors(&[("a.yaml", &text)], &stored),
        [
            "a.yaml: document 0, line 5, column 12: metadata.project: project \"web\" is archived and takes no new Task, expected an active project (set spec.archived: false on the Project first)",
            "a.yaml: document 1, line 13, column 12: metadata.project: project \"web\" is archived and takes no new Run, expected an active project (set spec.archived: false on the Project first)",
        ]
    );
    // Updating a stored task of an archived project is allowed.
    assert_eq!(
        batch_errors(
            &[("a.yaml", &task("old", "web", "  status: done\n"))],
            &stored
        ),
        Vec::<String>::new()
    );
    // Archived by the same batch.
    let archiving = format!(
        "{}---\n{}",
        PROJECT_WEB.replace("spec: {}", "spec:\n  archived: true"),
        task("new", "web", "")
    );
    assert_eq!(
        batch_errors(&[("b.yaml", &archiving)], &InMemoryState::default()),
        ["b.yaml: document 1, line 12, column 12: metadata.project: project \"web\" is archived and takes no new Task, expected an active project (set spec.archived: false on the Project first)"]
    );
    // Un-archived by the same batch.
    let unarchiving = format!("{PROJECT_WEB}---\n{}", task("new", "web", ""));
    assert_eq!(
        batch_errors(&[("c.yaml", &unarchiving)], &stored),
        Vec::<String>::new()
    );
    // A project that exists nowhere.
    assert_eq!(
        batch_errors(&[("d.yaml", &task("x", "nope", ""))], &InMemoryState::default()),
        ["d.yaml: document 0, line 5, column 12: metadata.project: project \"nope\" does not exist, expected a Project in this batch or already stored"]
    );
}

/// `parse_documents_and_values` (one read, for GitOps): the same documents
/// as `parse_documents` with the values `parse_values` reads, and on a bad
/// file exactly `parse_documents`' errors.
#[test]
fn documents_and_values_in_one_read_match_the_two_reads() {
    use pam_manifests::load::{parse_documents_and_values, parse_values};
    let text = "# leading comment\n---\napiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n---\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: a, project: web, labels: {x: 'y'}}\nspec: {title: A}\n";
    let both = parse_documents_and_values("f.yaml", text).unwrap();
    let docs = parse_documents("f.yaml", text).unwrap();
    let values = parse_values("f.yaml", text).unwrap();
    assert_eq!(both.len(), 2);
    for (((d, v), d2), (i, v2)) in both.iter().zip(&docs).zip(&values) {
        assert_eq!(d.index, d2.index);
        assert_eq!(d.manifest, d2.manifest);
        assert_eq!((d.index, v), (*i, v2));
    }
    // Positions still reach batch errors (lazily, from the one read).
    let existing = InMemoryState::default();
    let only: Vec<Document> = both.into_iter().map(|(d, _)| d).collect();
    let mut dup = only.clone();
    dup.push(only[1].clone());
    let errs: Vec<String> = validate_batch(&dup, &existing)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .starts_with("f.yaml: document 2, line 11, column 18: metadata.name: duplicate Task"),
        "{errs:?}"
    );

    let bad = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: a, project: web}\nspec: {title: A, colour: red}\n";
    let e1: Vec<String> = parse_documents_and_values("b.yaml", bad)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(e1, load_errors("b.yaml", bad));
}

/// A Secret's value that is not a string is refused by its type
/// and position, never quoted — from YAML and from JSON (the API's
/// `objects`).
#[test]
fn a_secret_value_is_never_in_an_error() {
    const DIGITS: &str = "4111111111111111";
    let secret = |values: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: keys\n  project: web\nspec:\n{values}")
    };
    let cases = [
        (
            format!("  stringData:\n    API_KEY: {DIGITS}\n"),
            "line 8, column 14: spec.stringData.API_KEY: expected a string, got a number",
        ),
        (
            format!("  stringData:\n    tls.key: {DIGITS}.5\n"),
            "line 8, column 14: spec.stringData.tls.key: expected a string, got a number",
        ),
        (
            "  data:\n    FLAG: true\n".to_string(),
            "line 8, column 11: spec.data.FLAG: expected a string, got a boolean",
        ),
        (
            format!("  stringData:\n    API_KEY: [{DIGITS}]\n"),
            "line 8, column 14: spec.stringData.API_KEY: expected a string, got a sequence",
        ),
        (
            format!("  stringData:\n    API_KEY: {{card: {DIGITS}}}\n"),
            "line 8, column 5: spec.stringData.API_KEY: expected a string, got a mapping",
        ),
        (
            format!("  stringData: {DIGITS}\n"),
            "line 7, column 15: spec.stringData: expected a mapping of keys to strings, got a number",
        ),
        (
            format!("  data: \"{DIGITS}\"\n"),
            "line 7, column 9: spec.data: expected a mapping of keys to strings, got a string",
        ),
    ];
    for (values, want) in &cases {
        let errors = load_errors("s.yaml", &secret(values));
        assert_eq!(errors, [format!("s.yaml: document 0, {want}")], "{values}");
    }
    // A value of the right type next to a wrong field: serde's message,
    // without the values it quotes.
    let errors = load_errors(
        "s.yaml",
        &secret(&format!(
            "  stringData:\n    API_KEY: \"{DIGITS}\"\n  extra: 1\n"
        )),
    );
    assert!(
        errors[0].contains("spec.extra: unknown field"),
        "{errors:?}"
    );
    assert!(!errors[0].contains(DIGITS), "{errors:?}");

    for value in [
        serde_json::json!(4111111111111111u64),
        serde_json::json!(true),
        serde_json::json!([DIGITS]),
        serde_json::json!({"card": DIGITS}),
    ] {
        let obj = serde_json::json!({
            "apiVersion": "pam.dev/v1", "kind": "Secret",
            "metadata": {"name": "keys", "project": "web"},
            "spec": {"stringData": {"API_KEY": value}}
        });
        let errors = pam_manifests::load::document_from_value("<request>", 0, obj).unwrap_err();
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(
            shown[0].starts_with(
                "<request>: document 0: spec.stringData.API_KEY: expected a string, got "
            ),
            "{shown:?}"
        );
        assert!(!shown[0].contains(DIGITS), "{shown:?}");
    }
    let obj = serde_json::json!({
        "apiVersion": "pam.dev/v1", "kind": "Secret",
        "metadata": {"name": "keys", "project": "web"},
        "spec": {"stringData": {"API_KEY": DIGITS}, "data": DIGITS}
    });
    let errors = pam_manifests::load::document_from_value("<request>", 0, obj).unwrap_err();
    assert!(!format!("{errors:?}").contains(DIGITS), "{errors:?}");
}

/// A Source's git URL that would make git run a command, or
/// that holds credentials, is refused at its line.
#[test]
fn git_urls_that_run_commands_are_refused() {
    let source = |url: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Source\nmetadata:\n  name: repo\nspec:\n  projects: [web]\n  git:\n    url: {url:?}\n")
    };
    for (url, want) in [
        ("EXT::sh -c id", "the EXT:: transport runs a remote helper"),
        (" ext::sh -c id", "has leading or trailing whitespace"),
        ("fd::3", "the fd:: transport runs a remote helper"),
        (
            "ssh://-oProxyCommand=touch /tmp/x/r.git",
            "the host or user starts with '-'",
        ),
        (
            "git@-oProxyCommand=x:r.git",
            "the host or user starts with '-'",
        ),
        (
            "foo://example.com/r.git",
            "the foo:// scheme is not allowed",
        ),
        (
            "https://user:tok@example.com/r.git",
            "holds a password or token",
        ),
    ] {
        let errors = load_errors("src.yaml", &source(url));
        assert_eq!(errors.len(), 1, "{url}: {errors:?}");
        assert!(
            errors[0].starts_with("src.yaml: document 0, line 8, column 10: spec.git.url: ")
                && errors[0].contains(want),
            "{url}: {errors:?}"
        );
        assert!(!errors[0].contains("tok@"), "{errors:?}");
    }
    for url in ["HTTPS://example.com/r.git", "git@example.com:team/r.git"] {
        assert_eq!(load("src.yaml", &source(url)).len(), 1, "{url}");
    }
}

/// `worker.pam.dev/` holds what a host's worker reports for
/// itself, so a Host manifest (an operator) cannot set a label there; the
/// same key in a Run's target selector is how an operator opts in to
/// trusting a worker's report, and stays allowed.
#[test]
fn host_labels_refuse_the_worker_namespace() {
    let host = "\
apiVersion: pam.dev/v1
kind: Host
metadata:
  name: box
  labels:
    worker.pam.dev/secure: \"true\"
spec:
  platform: linux
  labels:
    secure: \"true\"
    worker.pam.dev/gpu: a100
";
    assert_eq!(
        batch_errors(&[("h.yaml", host)], &InMemoryState::default()),
        vec![
            "h.yaml: document 0, line 6, column 28: metadata.labels.worker.pam.dev/secure: the prefix worker.pam.dev/ is reserved for the labels a host's worker reports; expected an operator label without it",
            "h.yaml: document 0, line 11, column 25: spec.labels.worker.pam.dev/gpu: the prefix worker.pam.dev/ is reserved for the labels a host's worker reports; expected an operator label without it",
        ]
    );
    let operator_only = host
        .replace("    worker.pam.dev/secure: \"true\"\n", "    os: linux\n")
        .replace("    worker.pam.dev/gpu: a100\n", "");
    assert!(batch_errors(&[("h.yaml", &operator_only)], &InMemoryState::default()).is_empty());
    let run =
        format!("{PROJECT_WEB}---\n{RUN}  target:\n    selector: {{worker.pam.dev/gpu: a100}}\n");
    let docs = load("r.yaml", &run);
    let errors: Vec<String> = validate_batch(&docs, &InMemoryState::default())
        .iter()
        .map(|e| e.to_string())
        .filter(|e| e.contains("worker.pam.dev"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// `spec.providerVersion` must be a version requirement; the
/// error is at its file:line.
#[test]
fn provider_version_that_is_not_a_requirement() {
    let text = RUN.replace("  cwd: /src\n", "  cwd: /src\n  providerVersion: newest\n");
    let errors = load_errors("r.yaml", &text);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("r.yaml: document 0, line 11, column "),
        "{errors:?}"
    );
    assert!(errors[0].contains(": spec.providerVersion: "), "{errors:?}");
    assert!(
        errors[0].contains("\"newest\" is not a version requirement"),
        "{errors:?}"
    );
    let ok = RUN.replace(
        "  cwd: /src\n",
        "  cwd: /src\n  providerVersion: \">=1.2, <3\"\n",
    );
    assert_eq!(load("r.yaml", &ok).len(), 1);
}
