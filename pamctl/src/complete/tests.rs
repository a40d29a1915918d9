use super::*;

/// Names as a server would list them; remembers the project asked for.
struct Fake {
    asked: Vec<(Kind, Option<String>)>,
}

impl Names for Fake {
    fn names(&mut self, global: &cli::Global, kind: Kind) -> Vec<String> {
        self.asked.push((kind, global.project.clone()));
        let names: &[&str] = match kind {
            Kind::Project => &["api", "web"],
            Kind::Task => &["build", "release-1"],
            Kind::Run => &["build-1", "build-2", "lint-1"],
            Kind::Host => &["alpha", "beta"],
            Kind::Source => &["webshop"],
            Kind::Webhook => &["ci-hook"],
            Kind::Secret => &["api-keys"],
            Kind::Schedule => &["nightly"],
            Kind::Role => &["reader"],
        };
        names.iter().map(|s| s.to_string()).collect()
    }
}

fn c(line: &str) -> Candidates {
    c_with(line, &mut Fake { asked: Vec::new() })
}

fn c_with(line: &str, names: &mut Fake) -> Candidates {
    let mut words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    if line.ends_with(' ') || line.is_empty() {
        words.push(String::new());
    }
    complete(&words, names)
}

fn words(line: &str) -> Vec<String> {
    c(line).words
}

#[test]
fn verbs_and_sub_verbs() {
    let top = words("");
    for v in [
        "apply",
        "get",
        "explain",
        "api-resources",
        "label",
        "edit",
        "version",
    ] {
        assert!(top.contains(&v.to_string()), "{v} in {top:?}");
    }
    assert!(
        !top.iter().any(|w| w.starts_with("__") || w == "help"),
        "{top:?}"
    );
    assert_eq!(words("de"), ["describe", "delete"]);
    assert_eq!(words("task "), ["start", "done", "cancel", "reopen"]);
}

#[test]
fn kinds_kind_slash_name_and_names() {
    let k = c("get ");
    assert!(k.words.contains(&"runs".to_string()), "{k:?}");
    assert!(k.words.contains(&"run/".to_string()), "{k:?}");
    assert_eq!(k.directive, NO_SPACE);
    assert_eq!(words("get runs,ta"), ["runs,tasks"]);
    assert_eq!(words("get run/b"), ["run/build-1", "run/build-2"]);
    assert!(k.words.contains(&"events".to_string()), "{k:?}");
    assert_eq!(
        words("get events --for run/b"),
        ["run/build-1", "run/build-2"]
    );
    assert!(words("events --for ").contains(&"host/".to_string()));
    let mut fake = Fake { asked: Vec::new() };
    let names = c_with("-p web describe task ", &mut fake);
    assert_eq!(names.words, ["build", "release-1"]);
    assert_eq!(fake.asked, [(Kind::Task, Some("web".to_string()))]);
    assert_eq!(words("logs --project=api bu"), ["build-1", "build-2"]);
    assert_eq!(words("host disable "), ["alpha", "beta"]);
    assert_eq!(words("task start r"), ["release-1"]);
    assert_eq!(
        words("delete run/build-1 "),
        [
            "project/",
            "host/",
            "secret/",
            "task/",
            "run/",
            "schedule/",
            "source/",
            "webhook/",
            "role/"
        ]
    );
}

#[test]
fn flags_and_their_values() {
    let f = words("get --s");
    assert!(
        f.contains(&"--selector".to_string()) && f.contains(&"--show-labels".to_string()),
        "{f:?}"
    );
    assert!(f.contains(&"--server".to_string()), "globals too: {f:?}");
    assert_eq!(words("-p "), ["api", "web"]);
    assert_eq!(words("get runs -o j"), ["json", "jsonpath="]);
    assert_eq!(c("get runs -o j").directive, NO_SPACE);
    assert_eq!(c("get runs -o ta").directive, 0);
    assert_eq!(words("wait run/x --for "), {
        let mut w = vec!["condition=", "phase=", "delete"];
        w.extend([
            "phase=pending",
            "phase=spawning",
            "phase=running",
            "phase=exited",
            "phase=failed",
            "phase=stopped",
        ]);
        w.into_iter().map(String::from).collect::<Vec<_>>()
    });
    assert_eq!(words("wait run/x --for=phase=ex"), ["--for=phase=exited"]);
    assert_eq!(c("apply -f ").directive, FILES);
    assert_eq!(words("run start --provider e"), ["exec"]);
    assert_eq!(words("run start --task "), ["build", "release-1"]);
    assert_eq!(
        words("completion "),
        ["bash", "elvish", "fish", "powershell", "zsh"]
    );
}

#[test]
fn explain_paths() {
    let k = words("explain ");
    assert!(k.contains(&"run.".to_string()), "{k:?}");
    assert_eq!(words("explain run.spec.re"), ["run.spec.restartPolicy"]);
    assert_eq!(
        words("explain run.spec.restartPolicy.max"),
        ["run.spec.restartPolicy.maxAttempts"]
    );
    assert!(words("explain nope.x").is_empty());
}
