//! pamctl, the pam operator CLI (kubectl-shaped). stdout carries data only;
//! notes, progress and errors go to stderr. Exit codes: [`error::Exit`].

pub mod cli;
mod client;
mod cmd;
pub mod complete;
pub mod config;
pub mod duration;
pub mod error;
pub mod examples;
mod files;
pub mod jsonpath;
pub mod render;
mod roundtrip;
mod stream;
mod term;

use std::process::ExitCode;

use clap::FromArgMatches;
use pam_manifests::Kind;

use crate::client::{enc, Client};
use crate::config::{Inputs, Resolved};
use crate::error::{CliError, Result};
use crate::term::{paint, Stream, Style};

/// Parses the command line, runs the verb, prints any error, and returns
/// the documented exit code.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The completion entry point sits outside clap: the words it gets are
    // a half-typed command line, not pamctl's own flags.
    if args.get(1).is_some_and(|a| a == "__complete") {
        return complete::run(&args[2..]);
    }
    let parsed = examples::command()
        .try_get_matches_from(args)
        .and_then(|m| cli::Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version on stdout (exit 0) and usage errors
            // on stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let mut ctx = Ctx::new(cli.global);
    match cmd::run(&mut ctx, cli.command) {
        Ok(exit) => exit.into(),
        Err(e) => {
            report(&e);
            e.exit.into()
        }
    }
}

/// Prints an error on stderr (`error:` lines, then `hint:` lines).
pub(crate) fn report(e: &CliError) {
    let colour = term::colour(Stream::Stderr);
    for (label, text) in e.lines() {
        let style = if label == "error" {
            Style::Red
        } else {
            Style::Cyan
        };
        eprintln!("{}: {text}", paint(colour, style, label));
    }
}

/// What verbs share: the global flags, and the connection once resolved
/// (offline verbs never resolve it).
pub(crate) struct Ctx {
    pub(crate) global: cli::Global,
    resolved: Option<Resolved>,
}

impl Ctx {
    fn new(global: cli::Global) -> Ctx {
        Ctx {
            global,
            resolved: None,
        }
    }

    fn resolved(&mut self) -> Result<&Resolved> {
        if self.resolved.is_none() {
            let inputs = Inputs {
                flag_server: self.global.server.clone(),
                flag_token: self.global.token.clone(),
                flag_context: self.global.context.clone(),
                flag_project: self.global.project.clone(),
                flag_ca_file: self.global.ca_file.clone(),
                ..Inputs::from_env()
            };
            self.resolved = Some(config::resolve(&inputs)?);
        }
        Ok(self.resolved.as_ref().expect("just set"))
    }

    fn client(&mut self) -> Result<Client> {
        Client::new(self.resolved()?)
    }

    /// The project for project-scoped verbs.
    fn project(&mut self) -> Result<String> {
        self.resolved()?.project.clone().ok_or_else(|| {
            CliError::usage("no project given")
                .hint("pass -p/--project P, set PAM_PROJECT, or set `project` in the config file's context")
        })
    }

    /// The project given on the command line only (not the environment or
    /// the context): used to filter, never to default.
    fn explicit_project(&self) -> Option<&str> {
        self.global.project.as_deref()
    }
}

/// A kind from what the operator typed (`task`, `tasks`, `tk`, `Task`).
pub fn parse_kind(text: &str) -> Result<Kind> {
    Kind::parse_alias(text).ok_or_else(|| {
        let known: Vec<String> = Kind::ALL
            .iter()
            .map(|k| format!("{}|{}|{}", k.singular(), k.plural(), k.short()))
            .collect();
        CliError::usage(format!("unknown kind {text:?}"))
            .hint(format!("kinds: {}", known.join(", ")))
    })
}

/// `/api/v1/...` of a kind's collection; `project: None` for the
/// all-projects listing of tasks and runs.
pub(crate) fn collection_path(kind: Kind, project: Option<&str>) -> String {
    match (kind.is_project_scoped(), project) {
        (true, Some(p)) => format!("/api/v1/projects/{}/{}", enc(p), kind.plural()),
        _ => format!("/api/v1/{}", kind.plural()),
    }
}

/// `/api/v1/...` of one object.
pub(crate) fn object_path(kind: Kind, project: Option<&str>, name: &str) -> String {
    format!("{}/{}", collection_path(kind, project), enc(name))
}

impl Ctx {
    /// The project to address `kind` in: required for tasks and runs.
    fn project_for(&mut self, kind: Kind) -> Result<Option<String>> {
        if kind.is_project_scoped() {
            self.project().map(Some)
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Exit;

    #[test]
    fn kind_aliases() {
        for (text, kind) in [
            ("task", Kind::Task),
            ("tasks", Kind::Task),
            ("tk", Kind::Task),
            ("Task", Kind::Task),
            ("project", Kind::Project),
            ("projects", Kind::Project),
            ("proj", Kind::Project),
            ("run", Kind::Run),
            ("runs", Kind::Run),
            ("rn", Kind::Run),
            ("host", Kind::Host),
            ("hosts", Kind::Host),
            ("ho", Kind::Host),
        ] {
            assert_eq!(parse_kind(text).unwrap(), kind, "{text}");
        }
        let e = parse_kind("pods").unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert_eq!(
            e.to_string(),
            "error: unknown kind \"pods\"\nhint: kinds: project|projects|proj, host|hosts|ho, secret|secrets|sec, task|tasks|tk, run|runs|rn, schedule|schedules|sch, source|sources|src, webhook|webhooks|wh, role|roles|ro"
        );
    }

    #[test]
    fn api_paths() {
        assert_eq!(
            object_path(Kind::Task, Some("web"), "build"),
            "/api/v1/projects/web/tasks/build"
        );
        assert_eq!(collection_path(Kind::Run, None), "/api/v1/runs");
        assert_eq!(
            object_path(Kind::Host, Some("ignored"), "alpha"),
            "/api/v1/hosts/alpha"
        );
        assert_eq!(
            object_path(Kind::Project, None, "web"),
            "/api/v1/projects/web"
        );
    }
}
