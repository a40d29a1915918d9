//! One module per verb family; [`run`] dispatches.

mod apply;
mod events;
mod get;
mod imperative;
mod runs;
mod token;
mod validate;
mod watch;

use clap::CommandFactory;

use crate::cli::{Cli, Command};
use crate::error::{Exit, Result};
use crate::Ctx;

pub(crate) fn run(ctx: &mut Ctx, command: Command) -> Result<Exit> {
    match command {
        Command::Apply {
            files,
            prune,
            selector,
            applyset,
            dry_run,
        } => apply::apply(ctx, &files, prune, selector, applyset, dry_run),
        Command::Diff { files } => apply::diff(ctx, &files),
        Command::Get {
            kind,
            name,
            selector,
            output,
            all_projects,
            watch: true,
        } => watch::get_watch(
            ctx,
            &kind,
            name.as_deref(),
            selector.as_deref(),
            output,
            all_projects,
        ),
        Command::Get {
            kind,
            name,
            selector,
            output,
            all_projects,
            watch: false,
        } => get::get(
            ctx,
            &kind,
            name.as_deref(),
            selector.as_deref(),
            output,
            all_projects,
        ),
        Command::Describe { kind, name } => get::describe(ctx, &kind, &name),
        Command::Delete {
            args,
            files,
            recursive,
            selector,
        } => get::delete(ctx, &args, &files, recursive, selector.as_deref()),
        Command::Validate { files } => validate::validate(&files),
        Command::Task(t) => imperative::task(ctx, t),
        Command::Host(h) => imperative::host(ctx, h),
        Command::Token(t) => token::token(ctx, t),
        Command::Run(crate::cli::RunCommand::Start(s)) => runs::start(ctx, s),
        Command::Stop { run } => runs::stop(ctx, &run),
        Command::Signal { run, signal } => runs::signal(ctx, &run, signal),
        Command::Logs { run, follow } => runs::logs(ctx, &run, follow),
        Command::Wait {
            objects,
            for_,
            timeout,
            selector,
        } => watch::wait(ctx, &objects, &for_, &timeout, selector.as_deref()),
        Command::Attach { run, ttl } => runs::attach(ctx, &run, ttl),
        Command::Events { topic, follow } => events::events(ctx, topic.as_deref(), follow),
        Command::Completion { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "pamctl", &mut out);
            crate::term::out(&String::from_utf8_lossy(&out));
            Ok(Exit::Ok)
        }
    }
}
