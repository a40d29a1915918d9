//! Input validation on the HTTP side: one function per request body that
//! is not a manifest (manifests go through `pam_manifests::validate`).
//! Each refuses with a 4xx naming the field, before anything is read or
//! written, using the limits of `pam_manifests::limits` (one home for
//! every limit; docs/api.md, "Limits", lists them). NUL in any string of
//! any body is refused earlier, by [`crate::api::extract::Json`].

use axum::http::StatusCode;
use pam_manifests::limits::{
    HEARTBEAT_MAX_SESSIONS, LABELS_MAX_COUNT, SIGNAL_BATCH_MAX_SIGNALS, SIGNAL_TEXT_MAX_BYTES,
    SNAPSHOT_TEXT_MAX_BYTES, TOKEN_NAME_MAX_BYTES, WORKER_VERSION_MAX_BYTES,
};
use pam_manifests::protocol::{
    parse_session_name, Heartbeat, OutputSnapshot, RegisterRequest, SignalBatch, SignalOutcome,
    SignalResult,
};
use pam_manifests::{LabelKey, LabelValue};

use crate::api::ApiError;

fn unprocessable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
}

/// `field`: at most `max` bytes, and no control characters (text shown to
/// operators as one line).
fn short_text(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    if text.len() > max {
        return Err(unprocessable(format!(
            "{field}: {} bytes, expected at most {max} bytes",
            text.len()
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(unprocessable(format!(
            "{field}: must not contain control characters"
        )));
    }
    Ok(())
}

/// An operator token's name (`POST /api/v1/tokens`).
pub fn token_name(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("name: must not be empty"));
    }
    short_text("name", name, TOKEN_NAME_MAX_BYTES)
}

/// `POST /api/v1/workers/register`: the version, and the labels parsed by
/// the manifests' own label rules (a Host's `spec.labels`), at most
/// [`LABELS_MAX_COUNT`]. A reported key is filed under `worker.pam.dev/`,
/// so one with any other prefix is refused.
pub fn register(req: &RegisterRequest) -> Result<(), ApiError> {
    // A worker of a protocol this pamd does not serve is told
    // which side to upgrade, before anything of it is read further.
    let theirs = pam_manifests::protocol::protocol_of(req.protocol);
    if let Some(why) =
        pam_manifests::protocol::protocol_mismatch(pam_manifests::protocol::Peer::Worker, theirs)
    {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "protocol_mismatch",
            why,
        ));
    }
    short_text("version", &req.version, WORKER_VERSION_MAX_BYTES)?;
    if req.labels.len() > LABELS_MAX_COUNT {
        return Err(unprocessable(format!(
            "labels: {} labels, expected at most {LABELS_MAX_COUNT}",
            req.labels.len()
        )));
    }
    for (k, v) in &req.labels {
        LabelKey::worker_reported(k).map_err(|e| unprocessable(format!("labels: {e}")))?;
        LabelValue::parse(v).map_err(|e| unprocessable(format!("labels.{k}: {e}")))?;
    }
    if let Some(caps) = &req.capabilities {
        capabilities(caps)?;
    }
    Ok(())
}

/// A registration's capabilities: each provider a known name,
/// listed once (so at most one entry per provider), its version bounded
/// like the worker's own. Refused whole, so the host's previous
/// capabilities stay.
fn capabilities(caps: &pam_manifests::protocol::Capabilities) -> Result<(), ApiError> {
    use pam_manifests::kinds::Provider;
    const KNOWN: [Provider; 5] = [
        Provider::Claude,
        Provider::Codex,
        Provider::Gemini,
        Provider::Grok,
        Provider::Exec,
    ];
    if caps.providers.len() > KNOWN.len() {
        return Err(unprocessable(format!(
            "capabilities.providers: {} entries, expected at most {} (one per provider)",
            caps.providers.len(),
            KNOWN.len()
        )));
    }
    for (i, p) in caps.providers.iter().enumerate() {
        if !KNOWN.iter().any(|k| k.as_str() == p.name) {
            // The name is the worker's text: bounded before it is echoed.
            let shown: String = p.name.chars().take(64).collect();
            return Err(unprocessable(format!(
                "capabilities.providers[{i}].name: unknown provider {shown:?}, expected one of: claude, codex, gemini, grok, exec"
            )));
        }
        if caps.providers[..i].iter().any(|q| q.name == p.name) {
            return Err(unprocessable(format!(
                "capabilities.providers[{i}].name: {} listed twice, expected each provider once",
                p.name
            )));
        }
        if let Some(v) = &p.version {
            short_text(
                &format!("capabilities.providers[{i}].version"),
                v,
                WORKER_VERSION_MAX_BYTES,
            )?;
        }
    }
    Ok(())
}

/// `POST /api/v1/workers/heartbeat`: the running sessions' names in the
/// protocol's format, at most [`HEARTBEAT_MAX_SESSIONS`].
pub fn heartbeat(hb: &Heartbeat) -> Result<(), ApiError> {
    if hb.running.len() > HEARTBEAT_MAX_SESSIONS {
        return Err(unprocessable(format!(
            "running: {} sessions, expected at most {HEARTBEAT_MAX_SESSIONS}",
            hb.running.len()
        )));
    }
    for (i, s) in hb.running.iter().enumerate() {
        parse_session_name(&s.session_name)
            .map_err(|e| unprocessable(format!("running[{i}].session_name: {e}")))?;
    }
    Ok(())
}

/// `POST /api/v1/workers/signals`: the batch's size, then each signal's
/// session name and free text. A bad signal is `rejected` with a message
/// naming its field (the worker's outbox policy handles it like any other
/// rejection); the batch as a whole only fails when it is too big.
pub fn signal_batch(batch: &SignalBatch) -> Result<Vec<SignalResult>, ApiError> {
    if batch.signals.len() > SIGNAL_BATCH_MAX_SIGNALS {
        return Err(unprocessable(format!(
            "signals: {} signals, expected at most {SIGNAL_BATCH_MAX_SIGNALS} per batch",
            batch.signals.len()
        )));
    }
    let mut rejected = Vec::new();
    for (index, s) in batch.signals.iter().enumerate() {
        let problem = s
            .session_name
            .as_deref()
            .and_then(|n| parse_session_name(n).err())
            .map(|e| format!("session_name: {e}"))
            .or_else(|| {
                let text = [("reason", s.reason.as_deref()), ("at", Some(s.at.as_str()))];
                text.into_iter().find_map(|(field, t)| {
                    let t = t?;
                    (t.len() > SIGNAL_TEXT_MAX_BYTES).then(|| {
                        format!(
                            "{field}: {} bytes, expected at most {SIGNAL_TEXT_MAX_BYTES} bytes",
                            t.len()
                        )
                    })
                })
            })
            .or_else(|| s.result.as_ref().and_then(|r| r.problem()));
        if let Some(message) = problem {
            rejected.push(SignalResult {
                index,
                outcome: SignalOutcome::Rejected,
                message: Some(message),
            });
        }
    }
    Ok(rejected)
}

/// `POST /api/v1/workers/snapshots`: the text's size.
pub fn snapshot(snap: &OutputSnapshot) -> Result<(), ApiError> {
    if snap.text.len() > SNAPSHOT_TEXT_MAX_BYTES {
        return Err(unprocessable(format!(
            "text: {} bytes, expected at most {SNAPSHOT_TEXT_MAX_BYTES} bytes",
            snap.text.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pam_manifests::protocol::{Signal, SignalKind};
    use uuid::Uuid;

    fn reg() -> RegisterRequest {
        serde_json::from_value(serde_json::json!({
            "name": "h1", "platform": "linux", "instance_id": Uuid::nil(),
            "capacity": 1, "version": "0.1.0", "labels": {"gpu": "a100"}
        }))
        .unwrap()
    }

    #[test]
    fn registration_fields_are_bounded_and_labels_parsed() {
        assert!(register(&reg()).is_ok());
        let mut r = reg();
        r.version = "v".repeat(WORKER_VERSION_MAX_BYTES + 1);
        assert!(register(&r).unwrap_err().message.starts_with("version:"));
        let mut r = reg();
        r.labels.insert("Bad Key!".into(), "x".into());
        assert_eq!(register(&r).unwrap_err().status, 422);
        // A worker's keys go under worker.pam.dev/; another
        // prefix cannot be filed there without losing what it meant.
        let mut r = reg();
        r.labels.insert("pam.dev/secure".into(), "true".into());
        let e = register(&r).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(e.message.contains("pam.dev/secure"), "{}", e.message);
        let mut r = reg();
        r.labels
            .insert("worker.pam.dev/secure".into(), "true".into());
        assert!(register(&r).is_ok());
        let mut r = reg();
        r.labels = (0..=LABELS_MAX_COUNT)
            .map(|i| (format!("k{i}"), "v".into()))
            .collect();
        assert!(register(&r).unwrap_err().message.starts_with("labels:"));
    }

    #[test]
    fn capabilities_name_known_providers_once_with_bounded_versions() {
        let with = |providers: serde_json::Value| {
            let mut r = reg();
            r.capabilities = Some(
                serde_json::from_value(serde_json::json!({ "providers": providers })).unwrap(),
            );
            register(&r)
        };
        assert!(with(
            serde_json::json!([{"name": "claude", "version": "1.0.3"}, {"name": "exec"}])
        )
        .is_ok());
        let e = with(serde_json::json!([{"name": "copilot"}])).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(
            e.message.contains("unknown provider \"copilot\""),
            "{}",
            e.message
        );
        let many: Vec<_> = (0..10_000)
            .map(|_| serde_json::json!({"name": "claude"}))
            .collect();
        let e = with(serde_json::Value::Array(many)).unwrap_err();
        assert!(e.message.contains("10000 entries"), "{}", e.message);
        let e = with(serde_json::json!([{"name": "claude"}, {"name": "claude"}])).unwrap_err();
        assert!(e.message.contains("listed twice"), "{}", e.message);
        let e = with(serde_json::json!([{"name": "claude", "version": "1".repeat(1 << 20)}]))
            .unwrap_err();
        assert!(
            e.message.starts_with("capabilities.providers[0].version:"),
            "{}",
            e.message
        );
    }

    #[test]
    fn bad_session_names_reject_their_signal_only() {
        let mut bad = Signal::new(Uuid::nil(), 1, SignalKind::Orphan, "now".into());
        bad.session_name = Some("evil name 2 ; <script>".into());
        let mut good = bad.clone();
        good.session_name = Some("pam-0000abcd".into());
        let r = signal_batch(&SignalBatch {
            signals: vec![good, bad],
        })
        .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].index, 1);
        assert!(r[0]
            .message
            .as_deref()
            .unwrap()
            .starts_with("session_name:"));
    }

    #[test]
    fn token_names_are_bounded() {
        assert!(token_name("ci").is_ok());
        assert!(token_name(" ").is_err());
        assert!(token_name(&"n".repeat(TOKEN_NAME_MAX_BYTES + 1)).is_err());
    }
}
