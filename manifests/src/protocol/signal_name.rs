//! The signals an operator may send to a run's process.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A signal an operator may send to a run's process (`pamctl signal`,
/// `POST …/runs/{name}/signal`, [`OperatorSignal`]): the one list, shared by
/// pamctl, pamd and the worker.
///
/// Written as the bare upper-case name (`INT`); [`FromStr`] also takes any
/// case and a `SIG` prefix (`int`, `SIGINT`, `sigint`). Serde reads and
/// writes the bare upper-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SignalName {
    /// `SIGINT`: interrupt, as Ctrl-C.
    Int,
    /// `SIGTERM`: ask to terminate.
    Term,
    /// `SIGKILL`: kill; cannot be caught.
    Kill,
    /// `SIGHUP`: hang-up.
    Hup,
    /// `SIGQUIT`: quit, with a core dump where enabled.
    Quit,
    /// `SIGUSR1`: user-defined.
    Usr1,
    /// `SIGUSR2`: user-defined.
    Usr2,
}

impl SignalName {
    /// Every signal, in the order help texts list them.
    pub const ALL: [SignalName; 7] = [
        SignalName::Int,
        SignalName::Term,
        SignalName::Kill,
        SignalName::Hup,
        SignalName::Quit,
        SignalName::Usr1,
        SignalName::Usr2,
    ];

    /// The bare upper-case name (`"INT"`): on the wire, in events, in
    /// output.
    pub const fn as_str(self) -> &'static str {
        match self {
            SignalName::Int => "INT",
            SignalName::Term => "TERM",
            SignalName::Kill => "KILL",
            SignalName::Hup => "HUP",
            SignalName::Quit => "QUIT",
            SignalName::Usr1 => "USR1",
            SignalName::Usr2 => "USR2",
        }
    }
}

impl fmt::Display for SignalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A signal name that is not a [`SignalName`]; displays as
/// `unknown signal "FOO"; expected one of INT, TERM, KILL, HUP, QUIT, USR1, USR2`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal {text:?}; expected one of INT, TERM, KILL, HUP, QUIT, USR1, USR2")]
pub struct UnknownSignal {
    /// The text as given.
    pub text: String,
}

impl FromStr for SignalName {
    type Err = UnknownSignal;

    fn from_str(text: &str) -> Result<SignalName, UnknownSignal> {
        let upper = text.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        SignalName::ALL
            .into_iter()
            .find(|s| s.as_str() == bare)
            .ok_or_else(|| UnknownSignal {
                text: text.to_string(),
            })
    }
}

impl Serialize for SignalName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SignalName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
