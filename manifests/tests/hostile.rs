//! Hostile input: deep nesting, alias bombs, NUL bytes and
//! oversized fields are refused with a positioned error — never a stack
//! overflow, an unbounded expansion, or text PostgreSQL cannot store. Each
//! limit is `pam_manifests::limits`; messages name file, document, line and
//! field.

use std::time::{Duration, Instant};

use pam_manifests::load::{parse_documents, parse_values, Document};
use pam_manifests::validate::{validate_batch, InMemoryState};
use pam_manifests::Manifest;

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n";

/// A Task document whose `spec` ends with `spec_tail`, after a Project.
fn task_file(meta_tail: &str, spec_tail: &str) -> String {
    format!("{PROJECT}---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: a\n  project: web\n{meta_tail}spec:\n  title: A\n{spec_tail}")
}

fn load_errors(file: &str, text: &str) -> Vec<String> {
    match parse_documents(file, text) {
        Ok(docs) => panic!("{file} loaded {} documents, expected errors", docs.len()),
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

/// The batch errors of one file that loads.
fn batch_errors(file: &str, text: &str) -> Vec<String> {
    let docs = parse_documents(file, text).unwrap_or_else(|e| panic!("{e:#?}"));
    validate_batch(&docs, &InMemoryState::default())
        .iter()
        .map(|e| e.to_string())
        .collect()
}

const TOO_DEEP: &str =
    "nesting deeper than 64 levels, expected at most 64 mappings and sequences inside one another";

#[test]
fn deep_block_nesting_is_a_positioned_error_not_a_stack_overflow() {
    // `x:` then `- - - … a`: one block sequence inside another, ~2 bytes a
    // level. Both depths overflowed the stack before the limit.
    for depth in [5_000, 100_000] {
        let text = format!(
            "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: a, project: web}}\nspec: {{title: A}}\nx:\n{}a\n",
            "- ".repeat(depth)
        );
        // Level 1 is the root mapping, level 2 the first `- `: the 64th
        // `- ` (column 127) opens level 65.
        let want = format!("deep.yaml: document 0, line 6, column 127: {TOO_DEEP}");
        assert_eq!(load_errors("deep.yaml", &text), [want.as_str()], "{depth}");
        let values = parse_values("deep.yaml", &text).unwrap_err();
        assert_eq!(values[0].to_string(), want, "{depth}");
    }
}

#[test]
fn deep_flow_nesting_and_deep_json_are_refused_at_the_same_limit() {
    let text = format!("kind: Task\nx: {}{}\n", "[".repeat(100), "]".repeat(100));
    assert_eq!(
        load_errors("flow.yaml", &text),
        [format!(
            "flow.yaml: document 0, line 2, column 67: {TOO_DEEP}"
        )]
    );
    // Exactly 64 levels is fine (the error is then about the unknown
    // field, not the depth).
    let text = format!("kind: Task\nx: {}{}\n", "[".repeat(63), "]".repeat(63));
    let errors = load_errors("flow.yaml", &text);
    assert!(!errors[0].contains("nesting"), "{errors:?}");
    // A JSON object (the API's `objects`) is held to the same depth.
    let mut deep = serde_json::json!("leaf");
    for _ in 0..100 {
        deep = serde_json::json!([deep]);
    }
    let obj = serde_json::json!({
        "apiVersion": "pam.dev/v1", "kind": "Task",
        "metadata": {"name": "a", "project": "web"},
        "spec": {"title": "A", "description": deep},
    });
    assert_eq!(Manifest::from_json(obj).unwrap_err().to_string(), TOO_DEEP);
}

/// The classic: ten aliases per level, nine levels: 10^9 nodes from 566
/// bytes.
fn billion_laughs() -> String {
    let mut text = String::from("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: a, project: web}\nspec: {title: A}\nx:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let items = vec![format!("*{}", w[0]); 10].join(",");
        text.push_str(&format!("  {}: &{} [{items}]\n", w[1], w[1]));
    }
    text
}

#[test]
fn an_alias_bomb_is_refused_at_once() {
    let text = billion_laughs();
    assert!(text.len() < 600, "{}", text.len());
    let started = Instant::now();
    let errors = load_errors("laughs.yaml", &text);
    let values = parse_values("laughs.yaml", &text).unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(500), "took {took:?}");
    // `d` (line 9) copies 1,111 nodes per alias: its 8th alias crosses
    // the budget of 10,000 nodes more than the file writes out.
    assert_eq!(
        errors,
        ["laughs.yaml: document 0, line 9, column 31: aliases expand to more than 10035 nodes, expected at most 10000 more than the file writes out"]
    );
    assert_eq!(values[0].to_string(), errors[0]);
    // Aliases within the budget still expand.
    let fine = task_file(
        "  labels: &l {tier: web}\n",
        "  description: &d hello\n  assignee: *d\n",
    );
    let docs = parse_documents("fine.yaml", &fine).unwrap();
    let Manifest::Task(t) = &docs[1].manifest else {
        panic!("not a task")
    };
    assert_eq!(t.spec.assignee.as_deref(), Some("hello"));
}

#[test]
fn nul_in_text_is_refused_with_file_line_and_field() {
    let text = task_file("", "  description: \"a\\0b\"\n").replace("title: A", "title: \"a\\0b\"");
    assert_eq!(
        batch_errors("nul.yaml", &text),
        [
            "nul.yaml: document 1, line 12, column 10: spec.title: must not contain NUL (\\0) characters, expected text without them",
            "nul.yaml: document 1, line 13, column 16: spec.description: must not contain NUL (\\0) characters, expected text without them",
        ]
    );
    // A run's command, an annotation, a prompt.
    let run = format!(
        "{PROJECT}---\n{}---\napiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: r\n  project: web\n  annotations:\n    note: \"x\\0\"\nspec:\n  task: a\n  provider: exec\n  cwd: /src\n  prompt: \"\\0\"\n  command: [sh, \"-c\\0\"]\n",
        task_file("", "").split_once("---\n").unwrap().1
    );
    assert_eq!(
        batch_errors("run.yaml", &run),
        [
            "run.yaml: document 2, line 20, column 11: metadata.annotations.note: must not contain NUL (\\0) characters, expected text without them",
            "run.yaml: document 2, line 25, column 11: spec.prompt: must not contain NUL (\\0) characters, expected text without them",
            "run.yaml: document 2, line 26, column 17: spec.command[1]: must not contain NUL (\\0) characters, expected text without them",
        ]
    );
    // The API's JSON objects go through the same batch rules (no position).
    let obj = serde_json::json!({
        "apiVersion": "pam.dev/v1", "kind": "Project",
        "metadata": {"name": "web"}, "spec": {"displayName": "a\u{0}b"},
    });
    let doc = Document::from_manifest("<request>", 0, Manifest::from_json(obj).unwrap());
    let errors: Vec<String> = validate_batch(&[doc], &InMemoryState::default())
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errors,
        ["<request>: document 0: spec.displayName: must not contain NUL (\\0) characters, expected text without them"]
    );
}

#[test]
fn oversized_fields_are_refused_with_their_limit() {
    let long = |n: usize| "x".repeat(n);
    // At the limit: fine.
    let ok = task_file("", "").replace("title: A", &format!("title: {}", long(512)));
    assert_eq!(batch_errors("t.yaml", &ok), Vec::<String>::new());
    let text = task_file(&format!("  resourceVersion: \"{}\"\n", long(65)), "");
    let text = text.replace("title: A", &format!("title: {}", long(513)))
        + &format!(
            "  description: {}\n  assignee: {}\n",
            long(64 * 1024 + 1),
            long(257)
        );
    assert_eq!(
        batch_errors("big.yaml", &text),
        [
            "big.yaml: document 1, line 11, column 20: metadata.resourceVersion: 65 bytes, expected at most 64 bytes",
            "big.yaml: document 1, line 13, column 10: spec.title: 513 bytes, expected at most 512 bytes",
            "big.yaml: document 1, line 14, column 16: spec.description: 65537 bytes, expected at most 65536 bytes",
            "big.yaml: document 1, line 15, column 13: spec.assignee: 257 bytes, expected at most 256 bytes",
        ]
    );
    // Labels: 64 per map; annotations: 256 KiB of keys and values.
    let labels: String = (0..65).map(|i| format!("    k{i}: v\n")).collect();
    let annotations = format!("    big: {}\n", long(256 * 1024));
    let text = task_file(
        &format!("  labels:\n{labels}  annotations:\n{annotations}"),
        "",
    );
    assert_eq!(
        batch_errors("labels.yaml", &text),
        [
            "labels.yaml: document 1, line 11, column 3: metadata.labels: 65 labels, expected at most 64",
            "labels.yaml: document 1, line 77, column 3: metadata.annotations: 262147 bytes of keys and values, expected at most 262144 bytes",
        ]
    );
    // A run: prompt, cwd, command count and size, selector labels.
    let selector: String = (0..65).map(|i| format!("k{i}: v, ")).collect();
    let run = |spec: &str| {
        format!(
            "{PROJECT}---\n{}---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: r, project: web}}\nspec:\n  task: a\n  provider: exec\n{spec}",
            task_file("", "").split_once("---\n").unwrap().1
        )
    };
    let text = run(&format!(
        "  cwd: /{}\n  prompt: {}\n  target: {{selector: {{{selector}}}}}\n  command: [{}]\n",
        long(4096),
        long(256 * 1024 + 1),
        vec!["a"; 1025].join(", ")
    ));
    assert_eq!(
        batch_errors("run.yaml", &text),
        [
            "run.yaml: document 2, line 21, column 11: spec.prompt: 262145 bytes, expected at most 262144 bytes",
            "run.yaml: document 2, line 20, column 8: spec.cwd: 4097 bytes, expected at most 4096 bytes",
            "run.yaml: document 2, line 22, column 12: spec.target.selector: 65 labels, expected at most 64",
            "run.yaml: document 2, line 23, column 12: spec.command: 1025 arguments, expected at most 1024",
        ]
    );
    let text = run(&format!(
        "  cwd: /src\n  command: [{}]\n",
        vec![long(1024); 257].join(", ")
    ));
    assert_eq!(
        batch_errors("run.yaml", &text),
        ["run.yaml: document 2, line 21, column 12: spec.command: 263168 bytes of arguments, expected at most 262144 bytes"]
    );
}

#[test]
fn oversized_documents_and_files_are_refused_before_typing() {
    // A document past 1 MiB (of comments, even) is refused where it starts
    // (its `---`).
    let comments = "# filler\n".repeat(120_000);
    let text = format!("{PROJECT}---\n{comments}apiVersion: pam.dev/v1\n");
    let errors = load_errors("doc.yaml", &text);
    assert_eq!(
        errors,
        ["doc.yaml: document 1, line 5, column 1: document is larger than 1 MiB, expected at most 1048576 bytes per document"]
    );
    // Measured in bytes, not characters: 600,000 two-byte characters.
    let wide = task_file("", &format!("  description: {}\n", "é".repeat(600_000)));
    let errors = load_errors("wide.yaml", &wide);
    assert_eq!(
        errors,
        ["wide.yaml: document 1, line 5, column 1: document is larger than 1 MiB, expected at most 1048576 bytes per document"]
    );
    // A file past 16 MiB is refused before it is parsed.
    let big = format!("{PROJECT}{}", "#".repeat(16 << 20));
    assert_eq!(
        load_errors("big.yaml", &big),
        [format!(
            "big.yaml: document 0: file is {} bytes, expected at most 16777216 bytes (16 MiB)",
            big.len()
        )]
    );
}
