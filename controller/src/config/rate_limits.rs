//! `[rate_limits]` in pamd.toml: the per-token budgets,
//! operators' and workers' apart (api/rate_limit.rs says what a worker
//! needs):
//! ```toml
//! [rate_limits]
//! operator_per_second = 100   # sustained, per operator token
//! operator_burst = 1000       # at once
//! worker_per_second = 50      # per worker token (one host)
//! worker_burst = 200
//! auth_failures_per_second = 5  # unknown or revoked tokens, per client address
//! auth_failures_burst = 60
//! enabled = true
//! ```

use anyhow::bail;
use serde::Deserialize;

use crate::api::access::rate_limit::{Budget, Budgets};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitsConfig {
    pub enabled: bool,
    pub operator_per_second: f64,
    pub operator_burst: u32,
    pub worker_per_second: f64,
    pub worker_burst: u32,
    pub auth_failures_per_second: f64,
    pub auth_failures_burst: u32,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        let b = Budgets::default();
        RateLimitsConfig {
            enabled: true,
            operator_per_second: b.operator.per_second,
            operator_burst: b.operator.burst as u32,
            worker_per_second: b.worker.per_second,
            worker_burst: b.worker.burst as u32,
            auth_failures_per_second: b.auth_failures.per_second,
            auth_failures_burst: b.auth_failures.burst as u32,
        }
    }
}

impl RateLimitsConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        let rates_ok = [
            self.operator_per_second,
            self.worker_per_second,
            self.auth_failures_per_second,
        ]
        .iter()
        .all(|r| r.is_finite() && *r > 0.0);
        if !rates_ok {
            bail!("[rate_limits] operator_per_second, worker_per_second and auth_failures_per_second must be above 0");
        }
        if self.operator_burst == 0 || self.worker_burst == 0 || self.auth_failures_burst == 0 {
            bail!("[rate_limits] operator_burst, worker_burst and auth_failures_burst must be at least 1");
        }
        Ok(())
    }

    /// The budgets pamd limits with; None when disabled.
    pub fn budgets(&self) -> Option<Budgets> {
        self.enabled.then_some(Budgets {
            operator: Budget::new(self.operator_per_second, f64::from(self.operator_burst)),
            worker: Budget::new(self.worker_per_second, f64::from(self.worker_burst)),
            auth_failures: Budget::new(
                self.auth_failures_per_second,
                f64::from(self.auth_failures_burst),
            ),
        })
    }
}
