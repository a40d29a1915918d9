//! One module per verb family; [`run`] dispatches.

mod apply;
mod attach;
mod config;
mod delete;
mod edit;
pub(crate) mod events;
pub(crate) mod explain;
mod get;
mod imperative;
mod info;
mod logs;
mod meta;
mod result;
mod runs;
mod schedule;
mod secret;
pub(crate) mod suspend;
mod sync;
mod targets;
pub(crate) mod token;
mod top;
mod transcript;
mod validate;
mod wait;
mod watch;
pub(crate) mod webhooks;

use pam_manifests::Kind;

use crate::cli::{Command, FileArgs};
use crate::error::{CliError, Exit, Result};
use crate::Ctx;

pub(crate) fn run(ctx: &mut Ctx, command: Command) -> Result<Exit> {
    match command {
        Command::Apply {
            files,
            prune,
            dry_run,
            force_conflicts,
        } => apply::apply(
            ctx,
            &files,
            apply::Flags {
                prune,
                dry_run,
                force_conflicts,
            },
        ),
        Command::Sync { name, timeout } => sync::sync(ctx, &name, &timeout),
        Command::Diff {
            target,
            files,
            recursive,
            prune,
            revision,
            force_conflicts,
        } => match target.as_slice() {
            [] => apply::diff(ctx, &FileArgs { files, recursive }, prune, force_conflicts),
            [kind, name] if Kind::parse_alias(kind) == Some(Kind::Source) => {
                sync::diff_source(ctx, name, revision.as_deref())
            }
            _ => Err(CliError::usage(
                "diff takes -f FILE… or `source NAME`, e.g. pamctl diff source web",
            )),
        },
        Command::Get(a) => get::get(ctx, a),
        Command::Describe { args } => get::describe(ctx, &args),
        Command::Delete(a) => delete::delete(ctx, a),
        Command::Validate { files } => validate::validate(&files),
        Command::Task(t) => imperative::task(ctx, t),
        Command::Host(h) => imperative::host(ctx, h),
        Command::Token(t) => token::token(ctx, t),
        Command::Config(c) => config::config(&ctx.global, c),
        Command::Webhook(w) => webhooks::webhook(ctx, w),
        Command::Secret(s) => secret::secret(ctx, s),
        Command::Schedule(s) => schedule::schedule(ctx, s),
        Command::Run(crate::cli::RunCommand::Start(s)) => runs::start(ctx, s),
        Command::Stop { run } => runs::stop(ctx, &run),
        Command::Rerun { run } => runs::rerun(ctx, &run),
        Command::Suspend(a) => suspend::suspend(ctx, a, true),
        Command::Resume(a) => suspend::suspend(ctx, a, false),
        Command::Signal { run, signal } => runs::signal(ctx, &run, signal),
        Command::Logs {
            run,
            follow,
            tail,
            since,
            attempt,
        } => logs::logs(ctx, &run, follow, tail, since.as_deref(), attempt),
        Command::Transcript {
            run,
            follow,
            attempt,
            output,
        } => transcript::transcript(ctx, &run, attempt, follow, output.as_deref()),
        Command::Result {
            run,
            attempt,
            patch,
        } => result::result(ctx, &run, attempt, patch),
        Command::Wait {
            objects,
            for_,
            timeout,
            selector,
        } => wait::wait(ctx, &objects, &for_, &timeout, selector.as_deref()),
        Command::Attach { run, ttl } => attach::attach(ctx, &run, &ttl),
        Command::Events {
            topic,
            filters,
            follow,
        } => events::events(ctx, topic.as_deref(), &filters, follow),
        Command::Completion { shell } => {
            crate::term::out(&crate::complete::script(shell));
            Ok(Exit::Ok)
        }
        Command::Whoami => token::whoami(ctx),
        Command::Auth(crate::cli::AuthCommand::CanI { verb, kind }) => {
            token::can_i(ctx, &verb, &kind)
        }
        Command::Version { client, output } => info::version(ctx, client, output.as_deref()),
        Command::Explain { path, recursive } => explain::explain(&path, recursive),
        Command::ApiResources { output, no_headers } => {
            info::api_resources(output.as_deref(), no_headers)
        }
        Command::Label(a) => meta::label(ctx, meta::Which::Labels, &a),
        Command::Annotate(a) => meta::label(ctx, meta::Which::Annotations, &a),
        Command::Edit {
            args,
            force_conflicts,
        } => edit::edit(ctx, &args, force_conflicts),
        Command::Top {
            kind,
            all_projects,
            limit,
        } => top::top(ctx, &kind, all_projects, limit),
    }
}
