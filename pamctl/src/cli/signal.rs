//! `--signal`'s value parser (moved out of cli.rs, which keeps the verbs).

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use pam_manifests::protocol::SignalName;

/// `--signal`: pam's one list of operator signals ([`SignalName`]), parsed
/// by its own rule (any case, `SIG` prefix optional); help, completions and
/// errors list the names.
#[derive(Debug, Clone, Copy)]
pub struct SignalParser;

impl TypedValueParser for SignalParser {
    type Value = SignalName;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<SignalName, clap::Error> {
        let text = value.to_string_lossy();
        text.parse().map_err(|_| {
            // Worded by clap, like any other invalid value.
            let mut e = clap::Error::new(ErrorKind::InvalidValue).with_cmd(cmd);
            if let Some(arg) = arg {
                e.insert(
                    ContextKind::InvalidArg,
                    ContextValue::String(arg.to_string()),
                );
            }
            e.insert(
                ContextKind::InvalidValue,
                ContextValue::String(text.into_owned()),
            );
            e.insert(
                ContextKind::ValidValue,
                ContextValue::Strings(SignalName::ALL.map(|s| s.as_str().to_string()).to_vec()),
            );
            e
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            SignalName::ALL
                .into_iter()
                .map(|s| PossibleValue::new(s.as_str())),
        ))
    }
}
