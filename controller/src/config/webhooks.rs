//! `[webhooks]` in pamd.toml: where signing secrets are read
//! from until pam stores Secrets, how long an attempt may take, how
//! deliveries are retried, the links' base URL and how long finished
//! deliveries are kept:
//! ```toml
//! [webhooks]
//! signing_keys_dir = "/etc/pam/webhook-keys"  # <dir>/<project>/<secret>/<key>
//! timeout_seconds = 10        # one attempt: connect, send, answer
//! retry_initial_ms = 10000    # the first retry's wait, doubled each time
//! retry_max_seconds = 3600    # the longest wait between attempts
//! retry_for_hours = 24        # then the delivery is failed
//! public_url = "https://pam.example.com"  # links in bodies (unset: paths)
//! deliveries_days = 30        # delivered/failed deliveries kept
//! allow_networks = []         # e.g. ["10.20.0.0/16", "127.0.0.1", "::1/128"]
//! ```
//! Deliveries never follow a redirect, and by default never reach a
//! loopback, private, shared (CGNAT), link-local, unique-local or
//! unspecified address (checked on the address connected to, after DNS:
//! rules/webhooks/egress.rs). `allow_networks` lists CIDRs (or single
//! addresses) that may be reached anyway — a receiver on the same host or
//! network; an entry that is not one is an error at startup.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

use crate::rules::webhooks::deliveries::RetryPolicy;
use crate::rules::webhooks::egress::Egress;
use crate::rules::webhooks::keys::KeyFiles;
use crate::rules::webhooks::WebhookSettings;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    pub signing_keys_dir: Option<PathBuf>,
    pub timeout_seconds: u64,
    pub retry_initial_ms: u64,
    pub retry_max_seconds: u64,
    pub retry_for_hours: u64,
    pub public_url: Option<String>,
    pub deliveries_days: u32,
    pub allow_networks: Vec<String>,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            signing_keys_dir: None,
            timeout_seconds: 10,
            retry_initial_ms: 10_000,
            retry_max_seconds: 3600,
            retry_for_hours: 24,
            public_url: None,
            deliveries_days: 30,
            allow_networks: Vec::new(),
        }
    }
}

impl WebhooksConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.timeout_seconds == 0 {
            bail!("[webhooks] timeout_seconds must be at least 1");
        }
        if self.retry_initial_ms == 0 {
            bail!("[webhooks] retry_initial_ms must be at least 1");
        }
        if self.retry_max_seconds == 0 || self.retry_for_hours == 0 {
            bail!("[webhooks] retry_max_seconds and retry_for_hours must be at least 1");
        }
        if self.deliveries_days == 0 {
            bail!("[webhooks] deliveries_days must be at least 1");
        }
        self.egress()?;
        if let Some(u) = &self.public_url {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                bail!("[webhooks] public_url {u:?} must be an http(s) URL");
            }
        }
        Ok(())
    }

    fn egress(&self) -> anyhow::Result<Egress> {
        let nets: Vec<&str> = self.allow_networks.iter().map(String::as_str).collect();
        Egress::allowing(&nets).map_err(|e| anyhow::anyhow!("[webhooks] allow_networks: {e}"))
    }

    /// What the sender and apply run with.
    pub fn settings(&self) -> WebhookSettings {
        WebhookSettings {
            keys: Arc::new(KeyFiles::new(self.signing_keys_dir.clone())),
            retry: RetryPolicy {
                initial: Duration::from_millis(self.retry_initial_ms),
                max_interval: Duration::from_secs(self.retry_max_seconds),
                give_up_after: Duration::from_secs(self.retry_for_hours.saturating_mul(3600)),
            },
            timeout: Duration::from_secs(self.timeout_seconds),
            link_base: self.public_url.clone().unwrap_or_default(),
            // Checked by validate() at load.
            egress: self.egress().unwrap_or_default(),
        }
    }
}
