//! `run start`, `stop`, `signal`.

use pam_manifests::protocol::SignalName;
use pam_manifests::Kind;
use serde_json::{json, Map, Value};

use crate::cli::RunStart;
use crate::error::{CliError, Exit, Result};
use crate::{object_path, render, term, Ctx};

/// `TASK-YYYYMMDD-HHMMSS`, kept within a DNS label.
fn default_name(task: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    let keep = 63 - stamp.len() - 1;
    let base: String = task.chars().take(keep).collect();
    format!("{}-{stamp}", base.trim_end_matches('-'))
}

/// The Run manifest `run start` applies, checked with pam-manifests.
pub(crate) fn run_manifest(
    s: &RunStart,
    project: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Value> {
    let name = s.name.clone().unwrap_or_else(|| default_name(&s.task, now));
    let mut spec = Map::new();
    spec.insert("task".into(), json!(s.task));
    spec.insert("provider".into(), json!(s.provider));
    spec.insert("cwd".into(), json!(s.cwd));
    if let Some(p) = &s.prompt {
        spec.insert("prompt".into(), json!(p));
    }
    if let Some(h) = &s.target_host {
        spec.insert("target".into(), json!({ "host": h }));
    } else if !s.selector.is_empty() {
        let mut labels = Map::new();
        for kv in &s.selector {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(CliError::usage(format!("--selector {kv:?}: expected k=v")));
            };
            labels.insert(k.to_string(), json!(v));
        }
        spec.insert("target".into(), json!({ "selector": labels }));
    }
    if let Some(n) = s.max_attempts {
        spec.insert("restartPolicy".into(), json!({ "maxAttempts": n }));
    }
    let argv = if s.args.is_empty() {
        &s.command
    } else {
        &s.args
    };
    if !argv.is_empty() {
        spec.insert("command".into(), json!(argv));
    }
    let run = json!({
        "apiVersion": render::API_VERSION,
        "kind": "Run",
        "metadata": { "name": name, "project": project },
        "spec": spec,
    });
    check_like_a_file(&run, argv.is_empty())?;
    Ok(run)
}

/// Types the Run with the rules the server applies to every object
/// (`pam_manifests::load::document_from_value`, e.g. "exec needs a
/// command"), so `run start` refuses locally what the server would, with
/// the server's words.
fn check_like_a_file(run: &Value, no_command: bool) -> Result<()> {
    let Err(errors) = pam_manifests::load::document_from_value("run start", 0, run.clone()) else {
        return Ok(());
    };
    let details: Vec<String> = errors
        .iter()
        .map(|e| {
            if e.path.is_empty() {
                e.message.clone()
            } else {
                format!("{}: {}", e.path, e.message)
            }
        })
        .collect();
    let mut err = CliError::usage(format!("invalid run: {}", details.join("; ")));
    if no_command && errors.iter().any(|e| e.path == "spec.command") {
        err = err.hint(
            "give the command after the flags: pamctl run start … --provider exec -- cat, or --command ARG (repeatable)",
        );
    }
    Err(err)
}

pub(crate) fn start(ctx: &mut Ctx, s: RunStart) -> Result<Exit> {
    let project = ctx.project()?;
    let run = run_manifest(&s, &project, chrono::Utc::now())?;
    let client = ctx.client()?;
    let answer = client.post(
        "/api/v1/apply",
        &json!({ "objects": [run], "dryRun": false, "prune": false }),
    )?;
    for line in super::apply::result_lines(&answer) {
        term::outln(&line);
    }
    Ok(Exit::Ok)
}

pub(crate) fn stop(ctx: &mut Ctx, run: &str) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    client.post(
        &format!("{}/stop", object_path(Kind::Run, Some(&project), run)),
        &json!({}),
    )?;
    term::outln(&format!(
        "{} stop requested",
        render::qualified(Kind::Run, run)
    ));
    Ok(Exit::Ok)
}

/// `rerun RUN`: a new run with RUN's spec; prints its name.
pub(crate) fn rerun(ctx: &mut Ctx, run: &str) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    let answer = client.post(
        &format!("{}/rerun", object_path(Kind::Run, Some(&project), run)),
        &json!({}),
    )?;
    let name = crate::render::table::cell(&answer, "/metadata/name");
    term::outln(&name);
    term::note(&format!(
        "{} re-run: {} created",
        render::qualified(Kind::Run, run),
        render::qualified(Kind::Run, &name)
    ));
    Ok(Exit::Ok)
}

pub(crate) fn signal(ctx: &mut Ctx, run: &str, signal: SignalName) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    client.post(
        &format!("{}/signal", object_path(Kind::Run, Some(&project), run)),
        &json!({ "signal": signal.as_str() }),
    )?;
    term::outln(&format!(
        "{} signalled {}",
        render::qualified(Kind::Run, run),
        signal.as_str()
    ));
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_args() -> RunStart {
        RunStart {
            task: "build".into(),
            provider: "claude".into(),
            cwd: "/src/web".into(),
            prompt: Some("make it build".into()),
            name: None,
            target_host: None,
            selector: vec!["gpu=true".into(), "os=linux".into()],
            max_attempts: Some(3),
            command: vec![],
            args: vec![],
        }
    }

    #[test]
    fn run_start_builds_a_valid_run() {
        let now = crate::render::samples::now();
        let run = run_manifest(&start_args(), "web", now).unwrap();
        assert_eq!(
            run,
            json!({"apiVersion": "pam.dev/v1", "kind": "Run",
                "metadata": {"name": "build-20260301-120000", "project": "web"},
                "spec": {"task": "build", "provider": "claude", "cwd": "/src/web", "prompt": "make it build",
                    "target": {"selector": {"gpu": "true", "os": "linux"}},
                    "restartPolicy": {"maxAttempts": 3}}})
        );
        let bad = RunStart {
            provider: "vim".into(),
            ..start_args()
        };
        let e = run_manifest(&bad, "web", now).unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert!(e.message.contains("vim"), "{}", e.message);
        let long = RunStart {
            task: "a".repeat(63),
            ..start_args()
        };
        let name = default_name(&long.task, now);
        assert!(
            name.len() <= 63 && pam_manifests::Name::parse(&name).is_ok(),
            "{name}"
        );
    }

    #[test]
    fn exec_runs_need_a_command_and_others_refuse_one() {
        let now = crate::render::samples::now();
        let exec = RunStart {
            provider: "exec".into(),
            prompt: None,
            ..start_args()
        };
        let e = run_manifest(&exec, "web", now).unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert_eq!(
            e.message,
            "invalid run: spec.command: missing required field for provider exec, expected the argv to run (a non-empty list)"
        );
        assert_eq!(e.hints.len(), 1);
        let after_dashes = RunStart {
            args: vec!["cat".into(), "-n".into()],
            ..exec
        };
        let run = run_manifest(&after_dashes, "web", now).unwrap();
        assert_eq!(run["spec"]["command"], json!(["cat", "-n"]));
        let repeated = RunStart {
            command: vec!["sh".into(), "-c".into(), "make test".into()],
            args: vec![],
            ..after_dashes
        };
        let run = run_manifest(&repeated, "web", now).unwrap();
        assert_eq!(run["spec"]["command"], json!(["sh", "-c", "make test"]));
        let claude_with_command = RunStart {
            args: vec!["cat".into()],
            ..start_args()
        };
        let e = run_manifest(&claude_with_command, "web", now).unwrap_err();
        assert!(
            e.message
                .starts_with("invalid run: spec.command: command is only for provider exec"),
            "{}",
            e.message
        );
    }
}
