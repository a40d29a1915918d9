//! `pamctl top runs|tasks|projects`: the most expensive first, like
//! `kubectl top`. A run ranks by every attempt's usage, a task
//! by its roll-up (its subtasks' runs included), a project by all its runs.

use pam_manifests::Kind;

use super::get;
use crate::error::{CliError, Exit, Result};
use crate::render::usage;
use crate::{parse_kind, term, Ctx};

pub(crate) fn top(ctx: &mut Ctx, kind: &str, all_projects: bool, limit: usize) -> Result<Exit> {
    let kind = parse_kind(kind)?;
    if usage::pointer(kind).is_none() {
        return Err(CliError::usage(format!(
            "pamctl top lists runs, tasks or projects, not {}",
            kind.plural()
        )));
    }
    let (across, project) = get::scope(ctx, kind, all_projects)?;
    let client = ctx.client()?;
    let items = get::list(&client, kind, project.as_deref(), None)?;
    let with_project = across || (kind != Kind::Project && project.is_none());
    let table = usage::top(kind, &items, with_project, limit);
    if table.is_empty() {
        term::note(&format!("No {} with usage yet.", kind.plural()));
    } else {
        term::out(&table.render());
    }
    Ok(Exit::Ok)
}
