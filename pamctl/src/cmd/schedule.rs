//! `schedule trigger NAME`: one run of a Schedule now; prints
//! the run's name.

use pam_manifests::Kind;
use serde_json::json;

use crate::cli::ScheduleCommand;
use crate::error::{Exit, Result};
use crate::render::table::cell;
use crate::{object_path, term, Ctx};

pub(crate) fn schedule(ctx: &mut Ctx, cmd: ScheduleCommand) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    match cmd {
        ScheduleCommand::Trigger { name } => {
            let path = object_path(Kind::Schedule, Some(&project), &name);
            let answer = client.post(&format!("{path}/trigger"), &json!({}))?;
            let run = cell(&answer, "/run");
            term::outln(&run);
            term::note(&format!(
                "schedule.pam.dev/{name} triggered: run.pam.dev/{run} created"
            ));
        }
    }
    Ok(Exit::Ok)
}
