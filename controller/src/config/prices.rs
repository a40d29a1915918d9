//! `[prices]` in pamd.toml: what a provider's tokens cost when
//! the provider reports no cost of its own. Prices are US dollars per
//! million tokens; an entry replaces the default of the same provider and
//! model (docs/operations.md, "Price table"):
//! ```toml
//! [prices.claude.default]            # any claude model not listed
//! input = 3.0
//! cached_input = 0.30                # optional: the input price
//! output = 15.0
//! [prices.codex."gpt-5-codex"]
//! input = 1.25
//! output = 10.0
//! ```
//! An unknown provider, a model name that is not one, and a negative or
//! non-numeric price are errors naming the file, line and column.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::rules::runs::usage::{Price, PriceTable, PRICED_PROVIDERS};

/// The `[prices]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
pub(super) struct PricesFile(BTreeMap<ProviderKey, BTreeMap<ModelKey, Price>>);

impl PricesFile {
    /// The defaults with the file's entries on top.
    pub(super) fn table(self) -> PriceTable {
        PriceTable::with(
            self.0
                .into_iter()
                .map(|(p, models)| (p.0, models.into_iter().map(|(m, pr)| (m.0, pr)).collect()))
                .collect(),
        )
    }
}

/// A provider that reports usage.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ProviderKey(String);

impl<'de> Deserialize<'de> for ProviderKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !PRICED_PROVIDERS.contains(&s.as_str()) {
            return Err(serde::de::Error::custom(format!(
                "unknown provider {s:?} in [prices]; expected one of: {}",
                PRICED_PROVIDERS.join(", ")
            )));
        }
        Ok(ProviderKey(s))
    }
}

/// A model name as providers write them (`claude-sonnet-4-5`,
/// `gpt-5-codex`, `models/gemini-2.5-pro`), or `default`.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ModelKey(String);

impl<'de> Deserialize<'de> for ModelKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let ok = !s.is_empty()
            && s.len() <= 128
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@".contains(&b));
        if !ok {
            return Err(serde::de::Error::custom(format!(
                "{s:?} is not a model name (letters, digits and - _ . : / @, at most 128) \
                 or \"default\""
            )));
        }
        Ok(ModelKey(s))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Cli, Config};
    use std::path::Path;

    fn resolve(text: &str) -> anyhow::Result<Config> {
        Config::resolve(
            Some((Path::new("pamd.toml"), text)),
            &Cli::default(),
            Some(Path::new("/home/op")),
        )
    }

    #[test]
    fn file_entries_override_the_defaults() {
        let c = resolve(
            "listen = \"127.0.0.1:1\"\n[prices.claude.default]\ninput = 1\noutput = 2.5\n\
             [prices.codex.\"gpt-5-codex\"]\ninput = 0.5\ncached_input = 0.05\noutput = 4\n",
        )
        .unwrap();
        let p = c.prices.price("claude", Some("unlisted")).unwrap();
        assert_eq!((p.input, p.cached_input, p.output), (1.0, None, 2.5));
        let p = c.prices.price("codex", Some("gpt-5-codex")).unwrap();
        assert_eq!(p.cached_input, Some(0.05));
        assert!(c.prices.price("gemini", None).is_some(), "defaults stay");
    }

    #[test]
    fn bad_prices_name_file_line_and_column() {
        for (text, at, words) in [
            (
                "[prices.claude.default]\ninput = -1\noutput = 2\n",
                "pamd.toml:2:",
                "non-negative",
            ),
            (
                "[prices.claude.default]\ninput = 1\noutput = \"cheap\"\n",
                "pamd.toml:3:",
                "expected f64",
            ),
            (
                "\n[prices.openai.default]\ninput = 1\noutput = 2\n",
                "pamd.toml:2:",
                "unknown provider \"openai\"",
            ),
            (
                "[prices.claude.\"bad model!\"]\ninput = 1\noutput = 2\n",
                "pamd.toml:1:",
                "not a model name",
            ),
            (
                "[prices.claude.default]\ninput = 1\n",
                "pamd.toml:1:",
                "output",
            ),
        ] {
            let err = resolve(text).unwrap_err().to_string();
            assert!(err.starts_with(at), "{text:?}: {err}");
            assert!(err.contains(words), "{text:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }
}
