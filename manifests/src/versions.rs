//! Provider versions: what a worker reports from a provider
//! CLI's `--version` output, and a run's `spec.providerVersion`
//! requirement (semver's `VersionReq`, as in Cargo: `>=1.2`, `^2`,
//! `>=1.0, <3`). One reading of each, used by validation, the worker's
//! report, and the dispatch predicate in both stores.

pub use semver::{Version, VersionReq};

/// Parses a `spec.providerVersion`; the error says what is expected.
pub fn requirement(text: &str) -> Result<VersionReq, String> {
    VersionReq::parse(text).map_err(|e| {
        format!("{text:?} is not a version requirement ({e}), expected e.g. \">=1.0\", \"^2.1\" or \">=1.0, <3\"")
    })
}

/// The first `x.y.z` in a CLI's `--version` output (`claude 1.0.71 (Claude
/// Code)`, `v0.9.2`): the outputs differ in everything but that, so the
/// reading is lenient and anything after the patch number (a pre-release,
/// build text) is left out.
pub fn lenient(output: &str) -> Option<Version> {
    let bytes = output.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()) {
            if let Some(v) = triple(&output[i..]) {
                return Some(v);
            }
        }
        i += 1;
    }
    None
}

/// `x.y.z` at the start of `s`.
fn triple(s: &str) -> Option<Version> {
    let mut parts = [0u64; 3];
    let mut rest = s;
    for (n, part) in parts.iter_mut().enumerate() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 18 {
            return None;
        }
        *part = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        if n < 2 {
            rest = rest.strip_prefix('.')?;
        }
    }
    Some(Version::new(parts[0], parts[1], parts[2]))
}

/// Whether a reported version (`None`: the worker could not read one)
/// meets the requirement text; a requirement that does not parse (stored
/// before validation refused it) is met by nothing.
pub fn satisfies(version: Option<&str>, req: &str) -> bool {
    let (Some(v), Ok(req)) = (version.and_then(lenient), VersionReq::parse(req)) else {
        return false;
    };
    req.matches(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_triple_of_the_output_is_the_version() {
        assert_eq!(
            lenient("1.0.71 (Claude Code)"),
            Some(Version::new(1, 0, 71))
        );
        assert_eq!(
            lenient("codex-cli v0.9.2-beta\n"),
            Some(Version::new(0, 9, 2))
        );
        assert_eq!(
            lenient("gemini 2024 build 3.4.5"),
            Some(Version::new(3, 4, 5))
        );
        assert_eq!(lenient("version 12"), None);
        assert_eq!(lenient(""), None);
    }

    #[test]
    fn requirements_match_reported_versions() {
        assert!(satisfies(Some("claude 1.2.3"), ">=1.2"));
        assert!(!satisfies(Some("claude 1.1.9"), ">=1.2"));
        assert!(!satisfies(None, ">=0.0.0"));
        assert!(!satisfies(Some("1.2.3"), "not a req"));
        assert!(requirement(">=1.0, <3").is_ok());
        let e = requirement("lots").unwrap_err();
        assert!(e.contains("not a version requirement"), "{e}");
    }
}
