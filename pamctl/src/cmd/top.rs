//! `pamctl top runs|tasks|projects`: the most expensive first, like
//! `kubectl top`. A run ranks by every attempt's usage, a task
//! by its roll-up (its subtasks' runs included), a project by all its runs.

use pam_manifests::Kind;
use serde_json::Value;

use super::get;
use crate::error::{CliError, Exit, Result};
use crate::render::table::{cell, Table};
use crate::render::usage::{self, cost_at, dollars, n, pointer, tokens_at};
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
    let items = client.list(kind, project.as_deref(), None)?;
    let with_project = across || (kind != Kind::Project && project.is_none());
    let table = top_table(kind, &items, with_project, limit);
    if table.is_empty() {
        term::note(&format!("No {} with usage yet.", kind.plural()));
    } else {
        term::out(&table.render());
    }
    Ok(Exit::Ok)
}

/// `pamctl top`: the objects with usage, most expensive first (ties: more
/// tokens first, then by name), at most `limit`.
fn top_table(kind: Kind, items: &[Value], with_project: bool, limit: usize) -> Table {
    let Some(p) = pointer(kind) else {
        return Table::new(&["NAME"]);
    };
    let mut rows: Vec<&Value> = items.iter().filter(|o| o.pointer(p).is_some()).collect();
    rows.sort_by(|a, b| {
        cost_at(b, p)
            .total_cmp(&cost_at(a, p))
            .then(tokens_at(b, p).cmp(&tokens_at(a, p)))
            .then(cell(a, "/metadata/name").cmp(&cell(b, "/metadata/name")))
    });
    let mut headers = Vec::new();
    if with_project {
        headers.push("PROJECT");
    }
    headers.extend(["NAME", "COST", "TOKENS", "INPUT", "CACHED", "OUTPUT"]);
    let mut t = Table::new(&headers);
    for o in rows.into_iter().take(limit) {
        let mut row = Vec::new();
        if with_project {
            row.push(cell(o, "/metadata/project"));
        }
        row.extend([
            cell(o, "/metadata/name"),
            dollars(cost_at(o, p)),
            tokens_at(o, p).to_string(),
            n(o, &format!("{p}/inputTokens")).to_string(),
            n(o, &format!("{p}/cachedInputTokens")).to_string(),
            n(o, &format!("{p}/outputTokens")).to_string(),
        ]);
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::render::samples::run_with_usage as run;

    #[test]
    fn top_ranks_by_cost_then_tokens_and_skips_runs_without_usage() {
        let items = [
            run("cheap", 0.01, 100),
            json!({"metadata": {"name": "none"}, "status": {}}),
            run("dear", 2.5, 10),
            run("tie", 0.01, 200),
        ];
        let text = top_table(Kind::Run, &items, false, 10).render();
        let names: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(names, ["dear", "tie", "cheap"], "{text}");
        assert!(text.contains("$2.5000"), "{text}");
        assert_eq!(
            top_table(Kind::Run, &items, false, 1)
                .render()
                .lines()
                .count(),
            2
        );
    }
}
