//! `suspend`/`resume` (like `flux suspend source`): a Source
//! stops syncing, a Schedule stops ticking, until resumed. pamd sets
//! `spec.suspend`; the next apply of the manifest declares it again.

use clap::Args;
use pam_manifests::Kind;
use serde_json::json;

use crate::error::{CliError, Exit, Result};
use crate::{object_path, render, term, Ctx};

#[derive(Debug, Args)]
pub struct SuspendArgs {
    /// source NAME, schedule NAME, or KIND/NAME
    #[arg(value_name = "KIND[/NAME]", num_args = 1..=2, required = true)]
    pub args: Vec<String>,
}

/// The Source or Schedule the words name.
fn target(args: &[String]) -> Result<(Kind, String)> {
    let (kind, name) = match args {
        [one] => match one.split_once('/') {
            Some((k, n)) => (k, n),
            None => return Err(usage("name the object: source NAME or schedule NAME")),
        },
        [k, n] => (k.as_str(), n.as_str()),
        _ => return Err(usage("one object: source NAME or schedule NAME")),
    };
    let kind = match kind.to_ascii_lowercase().as_str() {
        "source" | "sources" | "src" => Kind::Source,
        "schedule" | "schedules" => Kind::Schedule,
        other => {
            return Err(usage(&format!(
                "{other:?} cannot be suspended: only a source or a schedule"
            )))
        }
    };
    Ok((kind, name.to_string()))
}

fn usage(message: &str) -> CliError {
    CliError::usage(message)
}

pub(crate) fn suspend(ctx: &mut Ctx, a: SuspendArgs, suspend: bool) -> Result<Exit> {
    let (kind, name) = target(&a.args)?;
    let project = ctx.project_for(kind)?;
    let client = ctx.client()?;
    let verb = if suspend { "suspend" } else { "resume" };
    client.post(
        &format!("{}/{verb}", object_path(kind, project.as_deref(), &name)),
        &json!({}),
    )?;
    term::outln(&format!(
        "{} {}",
        render::qualified(kind, &name),
        if suspend { "suspended" } else { "resumed" }
    ));
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_a_source_or_a_schedule() {
        assert_eq!(
            target(&words(&["source", "repo"])).unwrap(),
            (Kind::Source, "repo".into())
        );
        assert_eq!(
            target(&words(&["schedule/nightly"])).unwrap(),
            (Kind::Schedule, "nightly".into())
        );
        assert!(target(&words(&["run", "r1"])).is_err());
        assert!(target(&words(&["repo"])).is_err());
    }
}
