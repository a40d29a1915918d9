//! `secret rotate-key`: pamd writes a new current key to its key file,
//! re-seals every Secret with it and drops the keys nothing uses any more.
//! Values never leave pamd; this prints ids and counts.

use serde_json::{json, Value};

use crate::cli::SecretCommand;
use crate::error::Result;
use crate::render::table::cell;
use crate::{term, Ctx};

pub(crate) fn secret(ctx: &mut Ctx, cmd: SecretCommand) -> Result<crate::error::Exit> {
    let client = ctx.client()?;
    match cmd {
        SecretCommand::RotateKey { reseal_only } => {
            let answer = client.post(
                "/api/v1/secrets/rotate-key",
                &json!({ "resealOnly": reseal_only }),
            )?;
            let ids = |field: &str| -> String {
                let ids: Vec<&str> = answer
                    .get(field)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if ids.is_empty() {
                    "none".to_string()
                } else {
                    ids.join(", ")
                }
            };
            term::outln(&cell(&answer, "/keyId"));
            if reseal_only {
                term::note(&format!(
                    "{} Secret(s) re-sealed with key {}; no longer used (their lines may go from the key file): {}",
                    cell(&answer, "/resealed"),
                    cell(&answer, "/keyId"),
                    ids("removable")
                ));
            } else {
                term::note(&format!(
                    "secrets key rotated: {} Secret(s) re-sealed with key {}; retired {}",
                    cell(&answer, "/resealed"),
                    cell(&answer, "/keyId"),
                    ids("retired")
                ));
            }
        }
    }
    Ok(crate::error::Exit::Ok)
}
