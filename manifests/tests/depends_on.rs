//! `spec.dependsOn`: whole-batch validation with the stored
//! links, each error naming file, line, column, field and what was
//! expected; a cycle names every link and where it is declared.

use pam_manifests::load::{parse_documents, Document};
use pam_manifests::state::WorkItemKind;
use pam_manifests::validate::{validate_batch, InMemoryState, StoredProject, StoredTask};
use pam_manifests::Name;

fn batch_errors(files: &[(&str, &str)], existing: &InMemoryState) -> Vec<String> {
    let docs: Vec<Document> = files
        .iter()
        .flat_map(|(f, t)| parse_documents(f, t).unwrap_or_else(|e| panic!("{e:#?}")))
        .collect();
    validate_batch(&docs, existing)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn name(s: &str) -> Name {
    Name::parse(s).unwrap()
}

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: web\nspec: {}\n";

/// A Task document of project web; `deps` as a YAML block list.
fn task(name: &str, deps: &[&str], extra: &str) -> String {
    let mut s = format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: web\nspec:\n  title: {name}\n{extra}"
    );
    if !deps.is_empty() {
        s.push_str("  dependsOn:\n");
        for d in deps {
            s.push_str(&format!("    - {d}\n"));
        }
    }
    s
}

fn stored_web() -> InMemoryState {
    let mut st = InMemoryState::default();
    st.projects
        .insert(name("web"), StoredProject { archived: false });
    st
}

fn store_task(st: &mut InMemoryState, project: &str, t: &str, parent: Option<&str>, deps: &[&str]) {
    st.tasks.insert(
        (name(project), name(t)),
        StoredTask {
            kind: WorkItemKind::Task,
            parent: parent.map(name),
            depends_on: deps.iter().copied().map(name).collect(),
        },
    );
}

#[test]
fn a_chain_and_a_diamond_are_fine() {
    let text = [
        PROJECT.to_string(),
        task("a", &[], ""),
        task("b", &["a"], ""),
        task("c", &["b"], ""),
        task("d", &["b", "a"], ""),
        task("e", &["c", "d"], ""),
    ]
    .join("---\n");
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &InMemoryState::default()),
        Vec::<String>::new()
    );
}

#[test]
fn a_cycle_of_two_names_both_links_once() {
    let text = [
        PROJECT.to_string(),
        task("a", &["b"], ""),
        task("b", &["a"], ""),
    ]
    .join("---\n");
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &InMemoryState::default()),
        ["t.yaml: document 1, line 15, column 7: spec.dependsOn[0]: dependsOn makes a cycle a → b → a, expected dependencies without a cycle; links: a → b (t.yaml:15), b → a (t.yaml:25)"]
    );
}

#[test]
fn a_cycle_of_five_across_files_names_every_link() {
    let one = [
        PROJECT.to_string(),
        task("t1", &["t2"], ""),
        task("t2", &["t3"], ""),
    ]
    .join("---\n");
    let two = [
        task("t3", &["t4"], ""),
        task("t4", &["t5"], ""),
        task("t5", &["t1"], ""),
    ]
    .join("---\n");
    let errors = batch_errors(
        &[("one.yaml", &one), ("two.yaml", &two)],
        &InMemoryState::default(),
    );
    assert_eq!(
        errors,
        ["one.yaml: document 1, line 15, column 7: spec.dependsOn[0]: dependsOn makes a cycle t1 → t2 → t3 → t4 → t5 → t1, expected dependencies without a cycle; links: t1 → t2 (one.yaml:15), t2 → t3 (one.yaml:25), t3 → t4 (two.yaml:9), t4 → t5 (two.yaml:19), t5 → t1 (two.yaml:29)"]
    );
}

#[test]
fn a_cycle_closed_through_stored_links() {
    // Stored: b → c → a. The batch adds a → b.
    let mut st = stored_web();
    store_task(&mut st, "web", "a", None, &[]);
    store_task(&mut st, "web", "b", None, &["c"]);
    store_task(&mut st, "web", "c", None, &["a"]);
    let text = task("a", &["b"], "");
    assert_eq!(
        batch_errors(&[("a.yaml", &text)], &st),
        ["a.yaml: document 0, line 9, column 7: spec.dependsOn[0]: dependsOn makes a cycle a → b → c → a, expected dependencies without a cycle; links: a → b (a.yaml:9), b → c (stored), c → a (stored)"]
    );
    // Redeclaring c without its link in the same batch breaks the cycle.
    let fix = format!("{text}---\n{}", task("c", &[], ""));
    assert_eq!(batch_errors(&[("a.yaml", &fix)], &st), Vec::<String>::new());
}

#[test]
fn unknown_cross_project_self_duplicate_and_ancestor_are_refused() {
    let mut st = stored_web();
    st.projects
        .insert(name("api"), StoredProject { archived: false });
    store_task(&mut st, "api", "lib", None, &[]);
    let text = [
        PROJECT.to_string(),
        task("epic", &[], "  type: epic\n"),
        task(
            "a",
            &["ghost", "lib", "a", "epic", "child", "child"],
            "  parent: epic\n",
        ),
        task("child", &[], "  parent: a\n"),
    ]
    .join("---\n");
    assert_eq!(
        batch_errors(&[("t.yaml", &text)], &st),
        [
            "t.yaml: document 2, line 25, column 7: spec.dependsOn[0]: no task \"ghost\" in project \"web\", expected the name of a Task in this batch or already stored in project \"web\"",
            "t.yaml: document 2, line 26, column 7: spec.dependsOn[1]: task \"lib\" is in project \"api\", expected a task in project \"web\" (dependencies stay within a project)",
            "t.yaml: document 2, line 27, column 7: spec.dependsOn[2]: task \"a\" depends on itself, expected the name of another task",
            "t.yaml: document 2, line 28, column 7: spec.dependsOn[3]: task \"epic\" is an ancestor of \"a\" and is done only after it, expected a task that is not \"a\"'s parent or above",
            "t.yaml: document 2, line 30, column 7: spec.dependsOn[5]: task \"child\" is listed twice, expected each dependency once",
        ]
    );
}

#[test]
fn too_many_dependencies_are_refused() {
    let names: Vec<String> = (0..257).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let text = [PROJECT.to_string(), task("a", &refs, "")].join("---\n");
    let errors = batch_errors(&[("t.yaml", &text)], &InMemoryState::default());
    assert_eq!(
        errors[0],
        "t.yaml: document 1, line 15, column 5: spec.dependsOn: 257 dependencies, expected at most 256"
    );
}
