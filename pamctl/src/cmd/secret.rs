//! `secret rotate-key`: pamd writes a new current key to its key file,
//! re-seals every Secret with it and drops the keys nothing uses any more
//! (issue 18). Values never leave pamd; this prints ids and counts.

use serde_json::{json, Value};

use crate::cli::SecretCommand;
use crate::error::Result;
use crate::render::table::cell;
use crate::{term, Ctx};

pub(crate) fn secret(ctx: &mut Ctx, cmd: SecretCommand) -> Result<crate::error::Exit> {
    let client = ctx.client()?;
    match cmd {
        SecretCommand::RotateKey => {
            let answer = client.post("/api/v1/secrets/rotate-key", &json!({}))?;
            let retired: Vec<&str> = answer
                .get("retired")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            term::outln(&cell(&answer, "/keyId"));
            term::note(&format!(
                "secrets key rotated: {} Secret(s) re-sealed with key {}; retired {}",
                cell(&answer, "/resealed"),
                cell(&answer, "/keyId"),
                if retired.is_empty() {
                    "none".to_string()
                } else {
                    retired.join(", ")
                }
            ));
        }
    }
    Ok(crate::error::Exit::Ok)
}
