//! `[database]` in pamd.toml: the pool and the session timeouts every
//! connection carries (pam-store's postgres/pool.rs says why,
//! docs/operations.md "Database timeouts" how to choose them):
//! ```toml
//! [database]
//! max_connections = 16                  # this pamd's pool (replicas: the sum counts)
//! acquire_timeout_ms = 1000             # waiting for a connection; then 503
//! idle_in_transaction_timeout_ms = 5000 # a stopped pamd's session is ended after this
//! lock_timeout_ms = 3000                # the longest lock wait; then 503 / next pass
//! statement_timeout_ms = 60000          # the longest statement (a big apply's insert)
//! ```

use std::time::Duration;

use anyhow::bail;
use pam_store::postgres::PoolSettings;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// The most connections this pamd opens to PostgreSQL. With replicas,
    /// the sum over them is what the database serves: size it to the
    /// database, not to each pamd (docs/benchmarks.md, "Replicas").
    pub max_connections: u32,
    pub acquire_timeout_ms: u64,
    pub idle_in_transaction_timeout_ms: u64,
    pub lock_timeout_ms: u64,
    pub statement_timeout_ms: u64,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        let d = PoolSettings::default();
        let ms = |d: Duration| d.as_millis() as u64;
        Self {
            max_connections: d.max_connections,
            acquire_timeout_ms: ms(d.acquire_timeout),
            idle_in_transaction_timeout_ms: ms(d.idle_in_transaction_timeout),
            lock_timeout_ms: ms(d.lock_timeout),
            statement_timeout_ms: ms(d.statement_timeout),
        }
    }
}

impl DatabaseConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.max_connections < 4 {
            bail!("[database] max_connections must be at least 4 (the loops, the API and the event follower each hold one)");
        }
        // 0 would mean "no limit" to PostgreSQL: the very thing these
        // keys exist to prevent.
        for (key, v) in [
            ("acquire_timeout_ms", self.acquire_timeout_ms),
            (
                "idle_in_transaction_timeout_ms",
                self.idle_in_transaction_timeout_ms,
            ),
            ("lock_timeout_ms", self.lock_timeout_ms),
            ("statement_timeout_ms", self.statement_timeout_ms),
        ] {
            if v < 100 {
                bail!("[database] {key} must be at least 100");
            }
        }
        Ok(())
    }

    /// What pam-store opens the pool with.
    pub fn settings(&self) -> PoolSettings {
        let ms = Duration::from_millis;
        PoolSettings {
            max_connections: self.max_connections,
            acquire_timeout: ms(self.acquire_timeout_ms),
            idle_in_transaction_timeout: ms(self.idle_in_transaction_timeout_ms),
            lock_timeout: ms(self.lock_timeout_ms),
            statement_timeout: ms(self.statement_timeout_ms),
        }
    }
}
