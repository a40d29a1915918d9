//! An attempt's usage so far, from the provider's reports
//! ([`UsageReport`]): each model call counted once however often the
//! provider repeats it, turns added, the provider's own totals winning at
//! the end. What `progress` signals carry as `attempt_usage` and
//! `finished` as the final usage.

use pam_manifests::protocol::{ModelUsage, TokenUsage, USAGE_MODELS_MAX};

use super::stream::UsageReport;

/// Counts one attempt's usage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageMeter {
    /// Each call's usage by its id, in the order first seen.
    calls: Vec<(String, TokenUsage)>,
    /// Whole turns' usage, added; counted only while no call is known.
    turns: TokenUsage,
    /// The provider's totals, once reported.
    total: Option<TokenUsage>,
}

impl UsageMeter {
    /// Takes a report; whether the usage so far changed.
    pub fn report(&mut self, r: UsageReport) -> bool {
        let before = self.so_far();
        match r {
            UsageReport::Call { id, usage } => {
                match self.calls.iter_mut().find(|(c, _)| *c == id) {
                    // A call's usage only grows (its start, then its end):
                    // the larger figure of each field, never the sum.
                    Some((_, u)) => {
                        u.input_tokens = u.input_tokens.max(usage.input_tokens);
                        u.cached_input_tokens =
                            u.cached_input_tokens.max(usage.cached_input_tokens);
                        u.output_tokens = u.output_tokens.max(usage.output_tokens);
                        if u.model.is_none() {
                            u.model = usage.model;
                        }
                    }
                    None => self.calls.push((id, usage)),
                }
            }
            UsageReport::Turn(u) => {
                self.turns.input_tokens += u.input_tokens;
                self.turns.cached_input_tokens += u.cached_input_tokens;
                self.turns.output_tokens += u.output_tokens;
                if self.turns.model.is_none() {
                    self.turns.model = u.model;
                }
                if let Some(c) = u.cost_usd {
                    *self.turns.cost_usd.get_or_insert(0.0) += c;
                }
            }
            UsageReport::Total(u) => self.total = Some(u),
        }
        self.so_far() != before
    }

    /// The attempt's usage so far; `None` while nothing was reported.
    pub fn so_far(&self) -> Option<TokenUsage> {
        if let Some(t) = &self.total {
            return Some(t.clone());
        }
        if self.calls.is_empty() && self.turns == TokenUsage::default() {
            return None;
        }
        // Calls, when known, are the finer count of the same usage a turn
        // sums (codex: the session file's responses, the stream's turn).
        let mut sum = if self.calls.is_empty() {
            self.turns.clone()
        } else {
            TokenUsage::default()
        };
        let mut by_model: Vec<ModelUsage> = Vec::new();
        for (_, u) in &self.calls {
            sum.input_tokens += u.input_tokens;
            sum.cached_input_tokens += u.cached_input_tokens;
            sum.output_tokens += u.output_tokens;
            if sum.model.is_none() {
                sum.model = u.model.clone();
            }
            let name = u.model.clone().unwrap_or_default();
            let full = by_model.len() >= USAGE_MODELS_MAX;
            match by_model.iter_mut().find(|m| m.model == name) {
                Some(m) => {
                    m.input_tokens += u.input_tokens;
                    m.cached_input_tokens += u.cached_input_tokens;
                    m.output_tokens += u.output_tokens;
                }
                None if !full => by_model.push(ModelUsage {
                    model: name,
                    input_tokens: u.input_tokens,
                    cached_input_tokens: u.cached_input_tokens,
                    output_tokens: u.output_tokens,
                    cost_usd: None,
                }),
                None => {}
            }
        }
        // Per model only when the calls used several (each at its own
        // price in pamd) and none is unnamed.
        if by_model.len() > 1 && by_model.iter().all(|m| !m.model.is_empty()) {
            sum.by_model = by_model;
        }
        Some(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(i: u64, c: u64, o: u64, model: &str) -> TokenUsage {
        TokenUsage {
            input_tokens: i,
            cached_input_tokens: c,
            output_tokens: o,
            model: Some(model.into()),
            ..TokenUsage::default()
        }
    }

    fn call(id: &str, usage: TokenUsage) -> UsageReport {
        UsageReport::Call {
            id: id.into(),
            usage,
        }
    }

    #[test]
    fn a_call_repeated_on_each_block_counts_once_at_its_largest() {
        let mut m = UsageMeter::default();
        assert!(m.report(call("m1", u(1800, 300, 1, "s"))));
        assert!(
            !m.report(call("m1", u(1800, 300, 1, "s"))),
            "the same block line again"
        );
        assert!(m.report(call("m1", u(1800, 300, 45, "s"))), "its delta");
        assert!(
            !m.report(call("m1", u(1800, 300, 1, "s"))),
            "a late block line"
        );
        m.report(call("m2", u(1870, 1800, 9, "s")));
        let so_far = m.so_far().unwrap();
        assert_eq!(
            (
                so_far.input_tokens,
                so_far.cached_input_tokens,
                so_far.output_tokens
            ),
            (3670, 2100, 54)
        );
        assert_eq!(so_far.model.as_deref(), Some("s"));
        assert!(so_far.by_model.is_empty());
    }

    #[test]
    fn calls_of_several_models_are_listed_and_totals_win() {
        let mut m = UsageMeter::default();
        assert_eq!(m.so_far(), None);
        m.report(call("a", u(100, 0, 10, "big")));
        m.report(call("b", u(20, 0, 2, "small")));
        let so_far = m.so_far().unwrap();
        assert_eq!(so_far.by_model.len(), 2);
        assert_eq!(so_far.by_model[1].model, "small");
        let total = TokenUsage {
            cost_usd: Some(0.5),
            ..u(130, 0, 15, "big")
        };
        assert!(m.report(UsageReport::Total(total.clone())));
        assert_eq!(m.so_far(), Some(total));
    }

    #[test]
    fn turns_add() {
        let mut m = UsageMeter::default();
        m.report(UsageReport::Turn(u(10, 5, 1, "c")));
        m.report(UsageReport::Turn(u(20, 5, 2, "c")));
        let s = m.so_far().unwrap();
        assert_eq!(
            (s.input_tokens, s.cached_input_tokens, s.output_tokens),
            (30, 10, 3)
        );
    }
}
