//! What apply checks of a batch's Webhooks against pamd's state, positioned at
//! the field: each topic must name a topic pam journals or a prefix of one (the
//! event filter's syntax), and the signing secret must resolve
//! ([`SigningKeys`]) or be a key of a Secret in the same batch. The rest (an
//! http(s) URL, topic syntax) is checked when the document is loaded.

use pam_manifests::kinds::Manifest;
use pam_manifests::load::Document;
use pam_manifests::ManifestError;
use pam_store::{StoreResult, Tx};

use crate::events::filter::names_a_topic;
use crate::rules::webhooks::keys::SigningKeys;

/// Every problem of the batch's Webhooks; empty when none.
pub async fn check(
    tx: &mut dyn Tx,
    docs: &[Document],
    keys: &dyn SigningKeys,
) -> StoreResult<Vec<ManifestError>> {
    let mut errors = Vec::new();
    for d in docs {
        let Manifest::Webhook(w) = &d.manifest else {
            continue;
        };
        for (i, t) in w.spec.topics.iter().enumerate() {
            if !names_a_topic(t) {
                errors.push(d.error_at(
                    &format!("spec.topics[{i}]"),
                    format!(
                        "{t:?} matches no event topic, expected a topic (run.finished) or a prefix of one (run.); `pamctl events` lists them"
                    ),
                ));
            }
        }
        let r = &w.spec.signing_secret_ref;
        // A Secret of the same batch counts (it is written before the
        // Webhook: Kind::ALL puts Secrets first).
        let in_batch = docs.iter().any(|o| match &o.manifest {
            Manifest::Secret(s) => {
                s.metadata.project == r.project
                    && s.metadata.name == r.name
                    && (s.spec.data.contains_key(&r.key) || s.spec.string_data.contains_key(&r.key))
            }
            _ => false,
        });
        if !in_batch && keys.resolve(tx, r).await?.is_none() {
            errors.push(d.error_at(
                "spec.signingSecretRef",
                format!(
                    "no Secret {:?} with key {:?} in project {:?}, expected an existing Secret key holding the signing secret",
                    r.name.as_str(),
                    r.key,
                    r.project.as_str()
                ),
            ));
        }
    }
    Ok(errors)
}
