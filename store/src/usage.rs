//! Token usage and cost of a run: the current attempt's figures
//! and every attempt's together, as the `attempt_*` and `total_*` columns
//! of `runs` keep them.
//!
//! Cost is in micro-dollars (1e-6 USD): integers, so sums and budget
//! comparisons are exact.

use std::ops::{Add, Sub};

/// Tokens and cost of one step, one attempt or many runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    /// Input (prompt) tokens, cached ones included.
    pub input_tokens: i64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    pub cached_input_tokens: i64,
    /// Output (completion) tokens.
    pub output_tokens: i64,
    /// Cost in micro-dollars.
    pub cost_micro_usd: i64,
}

impl Usage {
    /// Input plus output tokens (cached input is part of input).
    pub fn tokens(&self) -> i64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Cost in US dollars.
    pub fn cost_usd(&self) -> f64 {
        self.cost_micro_usd as f64 / 1e6
    }

    /// Whether nothing was used.
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

impl Usage {
    /// `f` of each figure of `self` and `o` (the field-wise arithmetic of
    /// `+` and `-`).
    fn zip_with(self, o: Usage, f: fn(i64, i64) -> i64) -> Usage {
        Usage {
            input_tokens: f(self.input_tokens, o.input_tokens),
            cached_input_tokens: f(self.cached_input_tokens, o.cached_input_tokens),
            output_tokens: f(self.output_tokens, o.output_tokens),
            cost_micro_usd: f(self.cost_micro_usd, o.cost_micro_usd),
        }
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(self, o: Usage) -> Usage {
        self.zip_with(o, i64::saturating_add)
    }
}

impl Sub for Usage {
    type Output = Usage;
    fn sub(self, o: Usage) -> Usage {
        self.zip_with(o, i64::saturating_sub)
    }
}

/// A run's usage: the current attempt's and all attempts' together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunUsage {
    /// The current attempt (reset to zero by the restart requeue).
    pub attempt: Usage,
    /// Every attempt, the current one included (never reset).
    pub total: Usage,
}

impl RunUsage {
    /// A progress step's usage: added to the attempt and the total.
    pub fn add_step(&mut self, step: Usage) {
        self.attempt = self.attempt + step;
        self.total = self.total + step;
    }

    /// The provider's final totals for the attempt: they replace what the
    /// steps added up to (the provider's own count is authoritative), and
    /// the total moves by the difference.
    pub fn settle(&mut self, fin: Usage) {
        self.total = self.total - self.attempt + fin;
        self.attempt = fin;
    }

    /// The restart requeue: a new attempt starts from zero; the total keeps
    /// what the earlier attempts used.
    pub fn new_attempt(&mut self) {
        self.attempt = Usage::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(i: i64, o: i64, c: i64) -> Usage {
        Usage {
            input_tokens: i,
            cached_input_tokens: 0,
            output_tokens: o,
            cost_micro_usd: c,
        }
    }

    #[test]
    fn steps_add_and_final_totals_replace_the_attempt() {
        let mut r = RunUsage::default();
        r.add_step(u(10, 1, 5));
        r.add_step(u(10, 2, 5));
        assert_eq!(r.attempt, u(20, 3, 10));
        r.settle(u(30, 3, 250));
        assert_eq!(r.attempt, u(30, 3, 250));
        assert_eq!(r.total, u(30, 3, 250));
        r.new_attempt();
        r.add_step(u(1, 1, 1));
        assert_eq!(r.attempt, u(1, 1, 1));
        assert_eq!(r.total, u(31, 4, 251));
    }
}
