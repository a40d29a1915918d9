//! `[providers.<name>]` of worker.toml: each provider CLI's program,
//! command line and environment when the built-in ones do not fit.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ProviderKind;

/// `[providers.<name>]` tables; only the five known names are accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvidersConfig {
    pub claude: Option<ProviderConfig>,
    pub codex: Option<ProviderConfig>,
    pub gemini: Option<ProviderConfig>,
    pub grok: Option<ProviderConfig>,
    pub exec: Option<ProviderConfig>,
}

impl ProvidersConfig {
    /// The override for `kind`, if any.
    pub fn get(&self, kind: ProviderKind) -> Option<&ProviderConfig> {
        match kind {
            ProviderKind::Claude => self.claude.as_ref(),
            ProviderKind::Codex => self.codex.as_ref(),
            ProviderKind::Gemini => self.gemini.as_ref(),
            ProviderKind::Grok => self.grok.as_ref(),
            ProviderKind::Exec => self.exec.as_ref(),
        }
    }
}

/// One provider's override.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The CLI's program (a name on PATH or a path), keeping the built-in
    /// arguments: where the CLI is installed off PATH.
    pub program: Option<String>,
    /// Replaces the built-in command line whole; `{prompt}` is
    /// substituted, `{permissions}` expands to the permission flags (none
    /// when absent: the override wins).
    pub command: Option<Vec<String>>,
    /// Extra environment for the provider process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl ProvidersConfig {
    /// A command line override names a program.
    pub fn validate(&self) -> anyhow::Result<()> {
        for kind in ProviderKind::ALL {
            if let Some(ProviderConfig {
                command: Some(c), ..
            }) = self.get(kind)
            {
                anyhow::ensure!(
                    !c.is_empty() && !c[0].is_empty(),
                    "providers.{kind}.command must name a program"
                );
            }
        }
        Ok(())
    }
}
