//! Tests' replay of a captured run through its provider's parser: what
//! the wrapper would have read from it.

use pam_manifests::protocol::{Entry, EntryKind, TokenUsage};

use super::meter::UsageMeter;
use super::{parse_line, FinalResult, ProviderKind};

/// Everything a captured run's output said.
pub struct Replay {
    pub entries: Vec<Entry>,
    pub session_id: Option<String>,
    pub usage: Option<TokenUsage>,
    pub final_result: Option<FinalResult>,
    /// Lines that were not the provider's structured format.
    pub unstructured: usize,
}

impl Replay {
    /// The entries of `kind`.
    pub fn of(&self, kind: EntryKind) -> Vec<&Entry> {
        self.entries.iter().filter(|e| e.kind == kind).collect()
    }
}

/// Reads `stdout` then `stderr` (a capture's two files) as `kind`'s.
pub fn replay(kind: ProviderKind, stdout: &str, stderr: &str) -> Replay {
    let mut p = kind.parser().expect("a provider with a parser");
    let mut meter = UsageMeter::default();
    let mut r = Replay {
        entries: Vec::new(),
        session_id: None,
        usage: None,
        final_result: None,
        unstructured: 0,
    };
    let mut take = |out: super::Parsed, r: &mut Replay| {
        r.entries.extend(out.entries);
        r.session_id = out.session_id.or(r.session_id.take());
        for u in out.usage {
            meter.report(u);
        }
        r.final_result = out.final_result.or(r.final_result.take());
        r.usage = meter.so_far();
    };
    for line in stdout.lines() {
        match parse_line(p.as_mut(), line) {
            Some(out) => take(out, &mut r),
            None => r.unstructured += 1,
        }
    }
    for line in stderr.lines() {
        let mut out = super::Parsed::default();
        p.stderr_line(line, &mut out);
        take(out, &mut r);
    }
    let mut out = super::Parsed::default();
    p.finish(&mut out);
    take(out, &mut r);
    r
}
