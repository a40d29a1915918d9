//! Names, label keys and values, and label selectors — newtypes that can
//! only be built through `parse`, so a value of the type is proof that the
//! text was checked (STYLE.md, "parse, don't validate").
//!
//! The rules follow Kubernetes, which operators already know:
//! - [`Name`]: a DNS label (RFC 1123): `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`,
//!   at most 63 characters.
//! - [`LabelKey`]: an optional DNS-subdomain prefix and `/`, then a name of at
//!   most 63 characters of `[A-Za-z0-9_.-]` that starts and ends alphanumeric.
//! - [`LabelValue`]: empty, or like a label key's name part.
//! - [`LabelSelector`]: kubectl's `-l` syntax, equality- and set-based.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::limits::{LABEL_KEY_PREFIX_MAX_BYTES, NAME_MAX_BYTES};

/// Labels as stored on an object: key → value.
pub type Labels = BTreeMap<LabelKey, LabelValue>;

/// Annotations: label-like keys, free-form values.
pub type Annotations = BTreeMap<LabelKey, String>;

/// Why a name, label key, label value or selector was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct NameError {
    /// What was wrong and what was expected, in one sentence.
    pub message: String,
}

fn refuse(what: &str, text: &str, expected: &str) -> NameError {
    NameError {
        message: format!("invalid {what} {text:?}, expected {expected}"),
    }
}

/// The DNS-label pattern every [`Name`] matches.
pub const NAME_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
const NAME_EXPECTED: &str = "a DNS label: 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit";

/// An object's name: a DNS label (`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, ≤ 63).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 characters.
fn is_dns_label(text: &str) -> bool {
    let b = text.as_bytes();
    let ok_char = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= NAME_MAX_BYTES
        && b.iter().all(ok_char)
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
}

impl Name {
    /// Parses a DNS-label-like name.
    pub fn parse(text: &str) -> Result<Name, NameError> {
        Name::check(text).map(|()| Name(text.to_string()))
    }

    fn check(text: &str) -> Result<(), NameError> {
        if is_dns_label(text) {
            Ok(())
        } else {
            Err(refuse("name", text, NAME_EXPECTED))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A label key: `[prefix/]name` (Kubernetes rules).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelKey(String);

const KEY_EXPECTED: &str = "an optional DNS-subdomain prefix and '/', then 1-63 characters of [A-Za-z0-9_.-] starting and ending with a letter or digit";
const VALUE_EXPECTED: &str =
    "empty, or 1-63 characters of [A-Za-z0-9_.-] starting and ending with a letter or digit";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= NAME_MAX_BYTES
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS subdomain: dot-separated DNS labels, at most 253 characters.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= LABEL_KEY_PREFIX_MAX_BYTES && s.split('.').all(is_dns_label)
}

impl LabelKey {
    /// Parses a label (or annotation) key.
    pub fn parse(text: &str) -> Result<LabelKey, NameError> {
        LabelKey::check(text).map(|()| LabelKey(text.to_string()))
    }

    fn check(text: &str) -> Result<(), NameError> {
        let ok = match text.split_once('/') {
            Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
            None => is_label_name(text),
        };
        if ok {
            Ok(())
        } else {
            Err(refuse("label key", text, KEY_EXPECTED))
        }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The namespace of the labels a worker reports for itself (like
/// Kubernetes' NodeRestriction): a worker chooses its own labels, so they
/// must never satisfy a selector on the labels an operator sets (a Host
/// manifest, `pamctl label host`). A reported `gpu=a100` is kept as
/// `worker.pam.dev/gpu=a100`; a selector matches it only by naming that
/// key, and operators cannot set a key in this namespace.
pub const WORKER_LABEL_PREFIX: &str = "worker.pam.dev/";

impl LabelKey {
    /// Whether the key is in the worker-reported namespace
    /// ([`WORKER_LABEL_PREFIX`]).
    pub fn is_worker_reported(&self) -> bool {
        self.0.starts_with(WORKER_LABEL_PREFIX)
    }

    /// The key under which a worker's reported label `reported` is kept:
    /// `worker.pam.dev/<reported>`. A key that already carries that prefix
    /// stays as it is; any other prefix is refused, since folding
    /// `a.com/x` and `b.com/x` into one key would lose one of them.
    pub fn worker_reported(reported: &str) -> Result<LabelKey, NameError> {
        let key = LabelKey::parse(reported)?;
        if key.is_worker_reported() {
            return Ok(key);
        }
        if key.0.contains('/') {
            return Err(refuse(
                "worker label key",
                reported,
                "a key without a prefix (the controller files it under worker.pam.dev/)",
            ));
        }
        Ok(LabelKey(format!("{WORKER_LABEL_PREFIX}{}", key.0)))
    }
}

/// A label value: empty, or 1-63 characters of `[A-Za-z0-9_.-]` starting and
/// ending alphanumeric.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelValue(String);

impl LabelValue {
    /// Parses a label value.
    pub fn parse(text: &str) -> Result<LabelValue, NameError> {
        LabelValue::check(text).map(|()| LabelValue(text.to_string()))
    }

    fn check(text: &str) -> Result<(), NameError> {
        if text.is_empty() || is_label_name(text) {
            Ok(())
        } else {
            Err(refuse("label value", text, VALUE_EXPECTED))
        }
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! string_newtype {
    ($ty:ident, $schema_name:literal, $schema:expr) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                $ty::parse(s)
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            // Checked, then kept as given: an owned string (from a JSON
            // value) is not copied.
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = Cow::<'de, str>::deserialize(d)?;
                $ty::check(&text).map_err(serde::de::Error::custom)?;
                Ok($ty(text.into_owned()))
            }
        }

        impl schemars::JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($schema_name)
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $schema
            }
        }
    };
}

string_newtype!(
    Name,
    "Name",
    schemars::json_schema!({
        "description": "A DNS label: 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit.",
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "pattern": NAME_PATTERN,
    })
);
string_newtype!(
    LabelKey,
    "LabelKey",
    schemars::json_schema!({
        "description": "A label key: an optional DNS-subdomain prefix and '/', then 1-63 characters of [A-Za-z0-9_.-] starting and ending with a letter or digit.",
        "type": "string",
        "minLength": 1,
        "maxLength": 317,
        "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
    })
);
string_newtype!(
    LabelValue,
    "LabelValue",
    schemars::json_schema!({
        "description": "A label value: empty, or 1-63 characters of [A-Za-z0-9_.-] starting and ending with a letter or digit.",
        "type": "string",
        "maxLength": 63,
        "pattern": "^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$",
    })
);

/// One clause of a [`LabelSelector`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(LabelKey, LabelValue),
    /// `key!=value`; also matches objects without the key (as in Kubernetes).
    NotEquals(LabelKey, LabelValue),
    /// `key in (a,b)`: the set is never empty.
    In(LabelKey, BTreeSet<LabelValue>),
    /// `key notin (a,b)`; also matches objects without the key.
    NotIn(LabelKey, BTreeSet<LabelValue>),
    /// `key`: the key is present, with any value.
    Exists(LabelKey),
    /// `!key`: the key is absent.
    DoesNotExist(LabelKey),
}

impl Requirement {
    /// Whether `labels` satisfy this clause.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, set) => labels.get(k).is_some_and(|v| set.contains(v)),
            Requirement::NotIn(k, set) => !labels.get(k).is_some_and(|v| set.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

fn write_set(f: &mut fmt::Formatter<'_>, set: &BTreeSet<LabelValue>) -> fmt::Result {
    f.write_str("(")?;
    for (i, v) in set.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        f.write_str(v.as_str())?;
    }
    f.write_str(")")
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, set) => {
                write!(f, "{k} in ")?;
                write_set(f, set)
            }
            Requirement::NotIn(k, set) => {
                write!(f, "{k} notin ")?;
                write_set(f, set)
            }
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
        }
    }
}

/// A label selector in kubectl's `-l` syntax: comma-separated clauses, all
/// of which must hold (`k=v,k2!=v2,k3 in (a,b),k4 notin (c),k5,!k6`). The
/// empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// The clauses, in input order.
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses kubectl's selector syntax.
    pub fn parse(text: &str) -> Result<LabelSelector, NameError> {
        SelectorParser { text, pos: 0 }.parse()
    }

    /// Whether every clause holds for `labels`.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no clause (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        LabelSelector::parse(s)
    }
}

struct SelectorParser<'a> {
    text: &'a str,
    pos: usize,
}

impl SelectorParser<'_> {
    fn error(&self, expected: &str) -> NameError {
        NameError {
            message: format!(
                "invalid label selector {:?} at character {}: expected {expected}",
                self.text,
                self.pos + 1
            ),
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    /// A run of characters that may appear in a key or a value.
    fn word(&mut self) -> &str {
        let start = self.pos;
        let len = self
            .rest()
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
            .unwrap_or(self.rest().len());
        self.pos += len;
        &self.text[start..self.pos]
    }

    fn key(&mut self) -> Result<LabelKey, NameError> {
        self.skip_ws();
        let at = self.pos;
        let word = self.word().to_string();
        LabelKey::parse(&word).map_err(|e| {
            self.pos = at;
            self.error(&format!("a label key ({})", e.message))
        })
    }

    fn value(&mut self) -> Result<LabelValue, NameError> {
        self.skip_ws();
        let at = self.pos;
        let word = self.word().to_string();
        LabelValue::parse(&word).map_err(|e| {
            self.pos = at;
            self.error(&format!("a label value ({})", e.message))
        })
    }

    fn set(&mut self) -> Result<BTreeSet<LabelValue>, NameError> {
        self.skip_ws();
        if !self.eat("(") {
            return Err(self.error("'(' opening a set of values"));
        }
        let mut set = BTreeSet::new();
        loop {
            let v = self.value()?;
            if v.as_str().is_empty() {
                return Err(self.error("a value in the set"));
            }
            set.insert(v);
            self.skip_ws();
            if self.eat(")") {
                return Ok(set);
            }
            if !self.eat(",") {
                return Err(self.error("',' or ')' in a set of values"));
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, NameError> {
        self.skip_ws();
        if self.eat("!") {
            return Ok(Requirement::DoesNotExist(self.key()?));
        }
        let key = self.key()?;
        self.skip_ws();
        if self.eat("!=") {
            return Ok(Requirement::NotEquals(key, self.value()?));
        }
        if self.eat("==") || self.eat("=") {
            return Ok(Requirement::Equals(key, self.value()?));
        }
        if self.rest().is_empty() || self.rest().starts_with(',') {
            return Ok(Requirement::Exists(key));
        }
        let at = self.pos;
        match self.word() {
            "in" => Ok(Requirement::In(key, self.set()?)),
            "notin" => Ok(Requirement::NotIn(key, self.set()?)),
            _ => {
                self.pos = at;
                Err(self.error("'=', '==', '!=', 'in', 'notin', ',' or the end"))
            }
        }
    }

    fn parse(mut self) -> Result<LabelSelector, NameError> {
        let mut requirements = Vec::new();
        self.skip_ws();
        if self.rest().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            self.skip_ws();
            if self.rest().is_empty() {
                return Ok(LabelSelector { requirements });
            }
            if !self.eat(",") {
                return Err(self.error("',' between requirements"));
            }
        }
    }
}

#[cfg(test)]
mod tests;
