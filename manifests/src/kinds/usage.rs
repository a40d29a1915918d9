//! Token usage and cost in object status: a run's current
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

/// A spending limit: `spec.budget` of a Run (all its attempts
/// together) or of a Project (all its runs together). Either limit may be
/// absent; an absent budget limits nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// US dollars (a non-negative number).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "non_negative_dollars"
    )]
    #[schemars(range(min = 0))]
    pub max_cost_usd: Option<f64>,
    /// Input plus output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl Budget {
    /// Which limit `tokens` and `cost_usd` exceed (reached counts: a
    /// budget of 100 tokens allows fewer than 100), in words with the
    /// figures; `None` while within both.
    pub fn exceeded(&self, tokens: u64, cost_usd: f64) -> Option<String> {
        if let Some(max) = self.max_tokens.filter(|m| tokens >= *m) {
            return Some(format!("used {tokens} tokens of a budget of {max}"));
        }
        if let Some(max) = self.max_cost_usd.filter(|m| cost_usd >= *m) {
            return Some(format!("cost ${cost_usd:.4} of a budget of ${max:.4}"));
        }
        None
    }
}

fn non_negative_dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<f64>::deserialize(d)?;
    match v {
        Some(x) if !x.is_finite() || x < 0.0 => Err(serde::de::Error::custom(format!(
            "expected a non-negative number of US dollars, got {x}"
        ))),
        v => Ok(v),
    }
}
