//! `pam.dev/sync-wave` (Argo CD's sync waves): an integer
//! annotation that orders the objects of one kind within one apply or
//! sync — their writes, their events, and so the order in which their
//! runs are created. pam writes a batch in one transaction, so waves do
//! not wait for earlier waves to become healthy (docs/gitops.md "Sync
//! waves"); an object without the annotation is in wave 0.

use super::{Document, ManifestError, Segment};
use crate::kinds::Manifest;

/// The annotation's key.
pub const SYNC_WAVE: &str = "pam.dev/sync-wave";

/// The most a wave may be off zero (Argo CD takes any integer; a bound
/// keeps the value one small number).
pub const MAX_WAVE: i64 = 1_000_000;

/// An object's wave: its annotation, 0 without one (or with a value
/// [`check`] refuses: a batch with one is never written).
pub fn wave_of(m: &Manifest) -> i64 {
    m.annotations()
        .iter()
        .find(|(k, _)| k.as_str() == SYNC_WAVE)
        .and_then(|(_, v)| parse(v).ok())
        .unwrap_or(0)
}

fn parse(v: &str) -> Result<i64, String> {
    match v.trim().parse::<i64>() {
        Ok(n) if n.abs() <= MAX_WAVE => Ok(n),
        _ => Err(format!(
            "{v:?} is not a wave; expected an integer between -{MAX_WAVE} and {MAX_WAVE} (as a string: \"-1\", \"0\", \"5\")"
        )),
    }
}

/// A `pam.dev/sync-wave` annotation that is not a whole number in range
/// is refused at its line.
pub(super) fn check(doc: &Document, errors: &mut Vec<ManifestError>) {
    for (k, v) in doc.manifest.annotations() {
        if k.as_str() != SYNC_WAVE {
            continue;
        }
        if let Err(why) = parse(v) {
            let path = ["metadata", "annotations", SYNC_WAVE].map(|k| Segment::Key(k.to_string()));
            errors.push(doc.error_at_segments(&path, why));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waves_are_bounded_integers() {
        assert_eq!(super::parse("5"), Ok(5));
        assert_eq!(super::parse(" -2 "), Ok(-2));
        for bad in ["", "1.5", "one", "99999999999", "0x10"] {
            assert!(super::parse(bad).is_err(), "{bad:?}");
        }
    }
}
