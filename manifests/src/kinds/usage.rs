//! Token usage and cost in object status (issue 21): a run's current
//! attempt and all its attempts; a task's and a project's roll-up.

use super::*;

/// Tokens and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UsageFigures {
    /// Input (prompt) tokens, cached ones included.
    pub input_tokens: u64,
    /// The part of `inputTokens` read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Cost in US dollars: the provider's own figure where it reports one,
    /// otherwise priced from pamd's `[prices]` table.
    pub cost_usd: f64,
}

/// A run's usage: the current attempt's and all attempts' together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunUsageStatus {
    /// The current attempt.
    pub attempt: UsageFigures,
    /// Every attempt, the current one included.
    pub total: UsageFigures,
}
