//! Usage and cost of a run: what one provider report is worth
//! ([`measure`]), and the price table that turns tokens into dollars when
//! the provider reports no cost of its own.
//!
//! # The rule
//! - A `progress` signal's usage is one step: it is added to the attempt's
//!   and the run's total figures ([`pam_store::RunUsage::add_step`]) only
//!   when the signal advances `last_progress_seq`, so a redelivered
//!   progress signal never counts twice.
//! - A `finished` signal's usage is the provider's final totals for the
//!   attempt: it replaces what the steps added up to
//!   ([`pam_store::RunUsage::settle`]); `finished` is one-shot
//!   (`processed_signals`), so it settles at most once.
//! - A `progress` signal may instead carry the attempt's usage so far
//!   (`attempt_usage`, each model call counted once by the worker): it
//!   settles the attempt like a final report, so a run stopped before
//!   its provider's final report shows what it used, counted once.
//! - Cost: the provider's own figure when it reports one (claude's
//!   `total_cost_usd`); otherwise tokens × the price of the provider and
//!   model in pamd's `[prices]` table (each model of `by_model` at its
//!   own price), the provider's `default` entry when the model is not
//!   listed or not reported.

use std::collections::BTreeMap;

use pam_manifests::kinds::Budget;
use pam_manifests::protocol::TokenUsage;
use pam_store::{Meta, Run, Usage};
use serde::Deserialize;

/// The providers that report usage (exec has no structured output).
pub const PRICED_PROVIDERS: [&str; 4] = ["claude", "codex", "gemini", "grok"];

/// The condition a run (being stopped) or a project (dispatching no new
/// runs) carries once it reached its budget, and its reason.
pub use pam_manifests::conditions::BUDGET_EXCEEDED;

/// The model key a provider's fallback price is listed under.
pub const DEFAULT_MODEL: &str = "default";

/// Prices of one model in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached input tokens.
    #[serde(deserialize_with = "dollars")]
    pub input: f64,
    /// Input tokens read from the prompt cache; absent: the input price.
    #[serde(default, deserialize_with = "some_dollars")]
    pub cached_input: Option<f64>,
    /// Output tokens.
    #[serde(deserialize_with = "dollars")]
    pub output: f64,
}

impl Price {
    const fn new(input: f64, cached_input: f64, output: f64) -> Price {
        Price {
            input,
            cached_input: Some(cached_input),
            output,
        }
    }

    /// The cost of `u` in micro-dollars: a price per million tokens is a
    /// price in micro-dollars per token.
    pub fn cost_micro_usd(&self, u: &Usage) -> i64 {
        let cached = u.cached_input_tokens.min(u.input_tokens);
        let micro = (u.input_tokens - cached) as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + u.output_tokens as f64 * self.output;
        micro.round() as i64
    }
}

/// A non-negative, finite number of dollars; anything else is an error
/// that TOML reports with the value's position.
fn dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !v.is_finite() || v < 0.0 {
        return Err(serde::de::Error::custom(format!(
            "a price must be a non-negative number of US dollars per million tokens, got {v}"
        )));
    }
    Ok(v)
}

fn some_dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    dollars(d).map(Some)
}

/// `[prices.<provider>.<model>]`: per provider, per model.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, BTreeMap<String, Price>>,
}

impl Default for PriceTable {
    /// The documented defaults (docs/operations.md, "Price table"): list
    /// prices in USD per million tokens as the providers published them;
    /// override them in pamd.toml when they change.
    fn default() -> Self {
        let table: &[(&str, &[(&str, Price)])] = &[
            (
                "claude",
                &[
                    (DEFAULT_MODEL, Price::new(3.0, 0.30, 15.0)),
                    ("claude-sonnet-4-5", Price::new(3.0, 0.30, 15.0)),
                    ("claude-opus-4-1", Price::new(15.0, 1.50, 75.0)),
                    ("claude-haiku-4-5", Price::new(1.0, 0.10, 5.0)),
                ],
            ),
            (
                "codex",
                &[
                    (DEFAULT_MODEL, Price::new(1.25, 0.125, 10.0)),
                    ("gpt-5-codex", Price::new(1.25, 0.125, 10.0)),
                    ("gpt-5", Price::new(1.25, 0.125, 10.0)),
                ],
            ),
            (
                "gemini",
                &[
                    (DEFAULT_MODEL, Price::new(1.25, 0.31, 10.0)),
                    ("gemini-2.5-pro", Price::new(1.25, 0.31, 10.0)),
                    ("gemini-2.5-flash", Price::new(0.30, 0.075, 2.50)),
                ],
            ),
            (
                "grok",
                &[
                    (DEFAULT_MODEL, Price::new(3.0, 0.75, 15.0)),
                    ("grok-4", Price::new(3.0, 0.75, 15.0)),
                    ("grok-code-fast-1", Price::new(0.20, 0.02, 1.50)),
                ],
            ),
        ];
        PriceTable {
            prices: table
                .iter()
                .map(|(p, models)| {
                    (
                        p.to_string(),
                        models.iter().map(|(m, pr)| (m.to_string(), *pr)).collect(),
                    )
                })
                .collect(),
        }
    }
}

impl PriceTable {
    /// The defaults with `overrides` on top: an entry replaces the default
    /// of the same provider and model; other defaults stay.
    pub fn with(overrides: BTreeMap<String, BTreeMap<String, Price>>) -> PriceTable {
        let mut t = PriceTable::default();
        for (provider, models) in overrides {
            t.prices.entry(provider).or_default().extend(models);
        }
        t
    }

    /// The price of `model` of `provider`, else the provider's default.
    pub fn price(&self, provider: &str, model: Option<&str>) -> Option<&Price> {
        let models = self.prices.get(provider)?;
        model
            .and_then(|m| models.get(m))
            .or_else(|| models.get(DEFAULT_MODEL))
    }
}

/// What one provider report is worth: tokens as reported, cost as the
/// provider reported it or else priced from `prices`.
pub fn measure(prices: &PriceTable, provider: &str, u: &TokenUsage) -> Usage {
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut usage = Usage {
        input_tokens: clamp(u.input_tokens),
        cached_input_tokens: clamp(u.cached_input_tokens),
        output_tokens: clamp(u.output_tokens),
        cost_micro_usd: 0,
    };
    let reported = |usd: Option<f64>| {
        usd.filter(|d| d.is_finite() && *d >= 0.0)
            .map(|d| (d * 1e6).round() as i64)
    };
    let priced = |model: Option<&str>, figures: &Usage| {
        prices
            .price(provider, model)
            .map_or(0, |p| p.cost_micro_usd(figures))
    };
    usage.cost_micro_usd = match reported(u.cost_usd) {
        Some(micro) => micro,
        // Each model at its own price (a side model is cheaper), or its
        // own reported cost.
        None if !u.by_model.is_empty() => u
            .by_model
            .iter()
            .map(|m| {
                let figures = Usage {
                    input_tokens: clamp(m.input_tokens),
                    cached_input_tokens: clamp(m.cached_input_tokens),
                    output_tokens: clamp(m.output_tokens),
                    cost_micro_usd: 0,
                };
                reported(m.cost_usd).unwrap_or_else(|| priced(Some(&m.model), &figures))
            })
            .sum(),
        None => priced(u.model.as_deref(), &usage),
    };
    usage
}

/// The `spec.budget` an object was declared with (a Run's or a
/// Project's), if any.
pub fn budget_of(meta: &Meta) -> Option<Budget> {
    meta.spec
        .get("budget")
        .and_then(|b| serde_json::from_value(b.clone()).ok())
}

/// Whether `used` reached `budget`: which limit, in words with the figures.
pub fn budget_exceeded(budget: Option<&Budget>, used: &Usage) -> Option<String> {
    budget?.exceeded(used.tokens().max(0) as u64, used.cost_usd())
}

/// When a project's budget hold last ended: the transition time of its
/// `BudgetExceeded` condition while False (the dispatch timeout of its
/// pending runs counts from there, not from the hold's start).
pub fn budget_released_at(meta: &Meta) -> Option<chrono::DateTime<chrono::Utc>> {
    meta.conditions
        .as_array()?
        .iter()
        .find(|c| c["type"] == BUDGET_EXCEEDED && c["status"] == "False")?["lastTransitionTime"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// Whether a run's usage over all its attempts reached its own budget.
pub fn run_over_budget(run: &Run) -> Option<String> {
    budget_exceeded(budget_of(&run.meta).as_ref(), &run.usage.total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(input: u64, cached: u64, output: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            ..TokenUsage::default()
        }
    }

    #[test]
    fn budgets_count_tokens_and_dollars_reached_or_over() {
        let used = Usage {
            input_tokens: 60,
            cached_input_tokens: 0,
            output_tokens: 40,
            cost_micro_usd: 250_000,
        };
        let b = |t: Option<u64>, c: Option<f64>| Budget {
            max_tokens: t,
            max_cost_usd: c,
        };
        assert_eq!(budget_exceeded(None, &used), None);
        assert_eq!(budget_exceeded(Some(&b(Some(101), Some(0.3))), &used), None);
        let m = budget_exceeded(Some(&b(Some(100), None)), &used).unwrap();
        assert_eq!(m, "used 100 tokens of a budget of 100");
        let m = budget_exceeded(Some(&b(None, Some(0.2))), &used).unwrap();
        assert_eq!(m, "cost $0.2500 of a budget of $0.2000");
    }

    #[test]
    fn provider_cost_wins_over_the_table() {
        let mut u = report(1_000_000, 0, 0);
        u.cost_usd = Some(0.25);
        let m = measure(&PriceTable::default(), "claude", &u);
        assert_eq!(m.cost_micro_usd, 250_000);
        assert_eq!(m.input_tokens, 1_000_000);
    }

    #[test]
    fn table_prices_cached_input_apart_and_falls_back_to_default() {
        let t = PriceTable::default();
        // 1M uncached in at $1.25, 1M cached at $0.125, 1M out at $10.
        let m = measure(&t, "codex", &report(2_000_000, 1_000_000, 1_000_000));
        assert_eq!(m.cost_micro_usd, 11_375_000);
        let mut u = report(1_000_000, 0, 0);
        u.model = Some("claude-opus-4-1".into());
        assert_eq!(measure(&t, "claude", &u).cost_micro_usd, 15_000_000);
        u.model = Some("no-such-model".into());
        assert_eq!(measure(&t, "claude", &u).cost_micro_usd, 3_000_000);
        assert_eq!(measure(&t, "exec", &u).cost_micro_usd, 0);
    }

    #[test]
    fn overrides_replace_one_entry_and_keep_the_rest() {
        let t = PriceTable::with(BTreeMap::from([(
            "claude".to_string(),
            BTreeMap::from([(
                DEFAULT_MODEL.to_string(),
                Price {
                    input: 1.0,
                    cached_input: None,
                    output: 2.0,
                },
            )]),
        )]));
        let m = measure(&t, "claude", &report(1_000_000, 500_000, 1_000_000));
        assert_eq!(m.cost_micro_usd, 3_000_000, "cached priced as input");
        assert!(t.price("claude", Some("claude-opus-4-1")).is_some());
    }
}
