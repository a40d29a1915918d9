//! `result RUN [--attempt N] [--patch]`: an attempt's workspace result
//! — its branch, commits and diff stats, or the patch itself
//! (coloured on a terminal only).

use pam_manifests::Kind;
use serde_json::Value;

use crate::error::{CliError, Exit, Result};
use crate::term::{self, paint, Style};
use crate::{object_path, Ctx};

pub(crate) fn result(ctx: &mut Ctx, run: &str, attempt: Option<u32>, patch: bool) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    let run_path = object_path(Kind::Run, Some(&project), run);
    let path = match attempt {
        Some(a) => format!("{run_path}/result?attempt={a}"),
        None => format!("{run_path}/result"),
    };
    let Some(body) = client.get_optional(&path)? else {
        // 404 for a missing run and for a run without a result: the run
        // itself tells them apart (its own 404 names it).
        client.get(&run_path)?;
        let which = attempt.map_or(String::new(), |a| format!(" for attempt {a}"));
        return Err(CliError::new(
            Exit::Refused,
            format!("run {run:?} has no workspace result{which}"),
        )
        .hint("a run reports one when its provider exits, if it has a spec.workspace"));
    };
    if patch {
        let text = body.get("patch").and_then(Value::as_str).unwrap_or("");
        term::out(&colour_patch(text, term::colour(term::Stream::Stdout)));
        if body.get("patchTruncated").and_then(Value::as_bool) == Some(true) {
            term::note("the patch is truncated: it was longer than the worker's [workspaces] patch_max_bytes");
        }
    } else {
        term::out(&summary(&body));
    }
    Ok(Exit::Ok)
}

/// The result as `describe` and `result` print it.
pub(crate) fn summary(r: &Value) -> String {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?");
    let n = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
    let truncated = if r.get("patchTruncated").and_then(Value::as_bool) == Some(true) {
        " (truncated)"
    } else {
        ""
    };
    let pushed = match r.get("pushed").and_then(Value::as_bool) {
        None => String::new(),
        Some(true) => "Pushed:   yes\n".to_string(),
        Some(false) => format!("Pushed:   no: {}\n", s("pushMessage")),
    };
    format!(
        "Attempt:  {}\nBranch:   {}\nBase:     {}\nHead:     {}\nCommits:  {}\nChanged:  {} files, +{} -{}\nPatch:    {} bytes{truncated}\n{pushed}",
        n("attempt"),
        s("branch"),
        s("baseCommit"),
        s("headCommit"),
        n("commits"),
        n("filesChanged"),
        n("insertions"),
        n("deletions"),
        n("patchBytes"),
    )
}

/// A unified diff with `+` lines green, `-` lines red and hunk headers
/// cyan when `on`; as is otherwise.
fn colour_patch(text: &str, on: bool) -> String {
    if !on {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let style =
            if body.starts_with("+++") || body.starts_with("---") || body.starts_with("diff ") {
                Some(Style::Bold)
            } else if body.starts_with('+') {
                Some(Style::Green)
            } else if body.starts_with('-') {
                Some(Style::Red)
            } else if body.starts_with("@@") {
                Some(Style::Cyan)
            } else {
                None
            };
        match style {
            Some(st) => out.push_str(&paint(true, st, body)),
            None => out.push_str(body),
        }
        out.push_str(nl);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_colour_only_when_asked() {
        let p = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n a\n+b\n-c\n";
        assert_eq!(colour_patch(p, false), p);
        let c = colour_patch(p, true);
        assert!(c.contains("\x1b[32m+b\x1b[0m\n"), "{c:?}");
        assert!(c.contains("\x1b[1;31m-c\x1b[0m\n"), "{c:?}");
        assert!(c.contains(" a\n"), "{c:?}");
    }
}
