//! The webhook sender: sends the queued deliveries
//! ([`pam_store::WebhookTx`]), each webhook's in seq order, and records
//! every attempt through the rules (`rules::webhooks::deliveries`).
//!
//! # Guarantees
//! - At least once: a delivery leaves the queue only when its 2xx is
//!   recorded; a pamd killed between the send and the record sends it
//!   again after restart, with the same delivery id and body (receivers
//!   dedupe on the `id` / `Pam-Delivery`).
//! - In order per webhook: a webhook's head delivery is retried until it
//!   is delivered or failed before the next one is sent.
//! - A slow or hanging endpoint holds up only its own webhook: each webhook
//!   drains in its own task, and every attempt is bounded by `[webhooks]
//!   timeout_seconds`.
//! - Where it sends is checked: no redirect is followed (a 3xx
//!   is a failed attempt naming its `Location`), and no address the
//!   egress rule refuses is connected to (`[webhooks] allow_networks`;
//!   names are checked as resolved, IP literals before the request).
//! - Runs on the replica holding the loops' lease only (it is started with
//!   the loops), and records through the fenced context: a deposed leader
//!   records nothing (what it sent meanwhile is sent again, at least once).
//!
//! # Signature
//! `Pam-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`
//! (docs/api.md, "Webhooks": a receiver recomputes it over the raw body
//! and rejects a stale `t`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use pam_store::{Delivery, DeliveryStatus, StoreError, Webhook};
use sha2::Sha256;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::ctx::Ctx;
use crate::rules::webhooks::deliveries::{self, Attempt};
use crate::rules::webhooks::egress::Egress;
use crate::rules::webhooks::spec_of;

/// How often the queue is looked at without a wake-up (retries coming
/// due, other replicas' commits).
const POLL: Duration = Duration::from_millis(250);
/// Deliveries read per queue read.
const BATCH: i64 = 100;

/// The `Pam-Signature` header value for `body` sent at `t` (unix seconds).
pub fn signature(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Runs the sender until `stop`: every poll (or wake-up), each webhook
/// with a due delivery and no drain running gets one.
pub async fn run(ctx: Ctx, stop: CancellationToken) {
    let client = match reqwest::Client::builder()
        .timeout(ctx.webhooks.timeout)
        .connect_timeout(ctx.webhooks.timeout)
        .user_agent(concat!("pamd/", env!("CARGO_PKG_VERSION")))
        // A redirect would send the signed body, or the signature
        // headers, wherever the receiver points: a 3xx is a
        // failed attempt instead.
        .redirect(reqwest::redirect::Policy::none())
        // Names resolve through the egress rule, so the address checked
        // is the one connected to; a proxy would connect instead, out of
        // the rule's sight.
        .dns_resolver(Arc::new(CheckedResolver(ctx.webhooks.egress.clone())))
        .no_proxy()
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook HTTP client; no deliveries are sent");
            return;
        }
    };
    let mut draining: HashMap<Uuid, JoinHandle<()>> = HashMap::new();
    loop {
        draining.retain(|_, h| !h.is_finished());
        match due(&ctx).await {
            Ok(ids) => {
                for id in ids {
                    if let std::collections::hash_map::Entry::Vacant(e) = draining.entry(id) {
                        e.insert(tokio::spawn(drain(ctx.clone(), client.clone(), id)));
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the webhook delivery queue"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = ctx.wakeups.deliveries.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    for h in draining.values() {
        h.abort();
    }
}

async fn due(ctx: &Ctx) -> pam_store::StoreResult<Vec<Uuid>> {
    let mut tx = ctx.store.begin().await?;
    tx.webhooks_due(ctx.now()).await
}

/// Sends one webhook's due deliveries in seq order until its queue is
/// empty, its head is not due yet, or its head failed an attempt.
async fn drain(ctx: Ctx, client: reqwest::Client, webhook: Uuid) {
    loop {
        let read = async {
            let mut tx = ctx.store.begin().await?;
            let hook = tx
                .list::<Webhook>(())
                .await?
                .into_iter()
                .find(|w| w.id == webhook);
            let batch = tx.pending_deliveries(webhook, BATCH).await?;
            pam_store::StoreResult::Ok((hook, batch))
        };
        let (hook, batch) = match read.await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a webhook's deliveries");
                return;
            }
        };
        let Some((hook, spec)) = hook.and_then(|h| spec_of(&h).map(|s| (h, s))) else {
            return;
        };
        if batch.is_empty() {
            return;
        }
        for d in batch {
            if d.next_attempt_at.is_some_and(|n| n > ctx.now()) {
                return;
            }
            let secret = match ctx.store.begin().await {
                Ok(mut tx) => ctx
                    .webhooks
                    .keys
                    .resolve(tx.as_mut(), &spec.signing_secret_ref)
                    .await
                    .ok()
                    .flatten(),
                Err(_) => None,
            };
            let started = Instant::now();
            let attempt = match secret {
                Some(secret) => send(&ctx, &client, &spec.url, &d, &secret).await,
                None => Attempt::NoAnswer(
                    "not sent: the signing secret is not found (spec.signingSecretRef)".into(),
                ),
            };
            ctx.metrics.webhook_attempt(&hook.name, started);
            match record(&ctx, &d, &attempt).await {
                Ok(DeliveryStatus::Delivered) => {
                    ctx.metrics.webhook_outcome(&hook.name, "delivered");
                }
                Ok(status) => {
                    let outcome = if status == DeliveryStatus::Failed {
                        tracing::warn!(webhook = %hook.name, delivery = %d.id, ?attempt, "webhook delivery failed: retries exhausted");
                        "failed"
                    } else {
                        tracing::debug!(webhook = %hook.name, delivery = %d.id, ?attempt, "webhook delivery will be retried");
                        "retry"
                    };
                    ctx.metrics.webhook_outcome(&hook.name, outcome);
                    return;
                }
                // A redelivery (or another sender) moved it: read again.
                Err(StoreError::Conflict(_)) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot record a webhook delivery attempt");
                    return;
                }
            }
        }
    }
}

/// Resolves a delivery's host name and keeps only the addresses the
/// egress rule allows: reqwest connects to what this returns, so a name
/// that resolves to a refused address the second time (DNS rebinding) is
/// refused the second time too.
struct CheckedResolver(Egress);

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let egress = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .filter(|a| match egress.check(a.ip()) {
                    Ok(()) => true,
                    Err(why) => {
                        refused.get_or_insert(why);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = refused.unwrap_or_else(|| "no address".to_string());
                return Err(format!("{host}: {why}").into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// An IP literal in the URL is never resolved (reqwest connects to it
/// directly), so it is checked here, before the request.
fn literal_refused(egress: &Egress, url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    egress.check(ip).err()
}

/// One attempt: POST the body, signed now.
async fn send(
    ctx: &Ctx,
    client: &reqwest::Client,
    url: &str,
    d: &Delivery,
    secret: &[u8],
) -> Attempt {
    if let Some(why) = literal_refused(&ctx.webhooks.egress, url) {
        return Attempt::NoAnswer(format!("not sent: {why}"));
    }
    let body = serde_json::to_vec(&d.payload).expect("JSON serializes");
    let t = ctx.now().timestamp();
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .header("pam-signature", signature(secret, t, &body))
        .header("pam-delivery", d.id.to_string())
        .header("pam-event", &d.topic)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(resp) if resp.status().is_redirection() => {
            // Said, not followed; never with user info, which may be a
            // password.
            let location: String = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|v| {
                    String::from_utf8_lossy(v.as_bytes())
                        .chars()
                        .take(500)
                        .collect()
                })
                .unwrap_or_default();
            Attempt::Redirected {
                code: resp.status().as_u16(),
                location: pam_manifests::urls::redacted(&location).into_owned(),
            }
        }
        Ok(resp) => Attempt::Answered(resp.status().as_u16()),
        Err(e) if e.is_timeout() => Attempt::NoAnswer(format!(
            "timed out after {}s",
            ctx.webhooks.timeout.as_secs_f64()
        )),
        Err(e) => {
            // The webhook's URL is known; the error need not repeat it.
            let e = e.without_url();
            let mut why = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                why = format!("{why}: {s}");
                src = s.source();
            }
            Attempt::NoAnswer(why)
        }
    }
}

async fn record(
    ctx: &Ctx,
    d: &Delivery,
    attempt: &Attempt,
) -> pam_store::StoreResult<DeliveryStatus> {
    let mut tx = ctx.store.begin().await?;
    let now = ctx.now();
    let row = deliveries::record_attempt(
        tx.as_mut(),
        d,
        attempt,
        &ctx.webhooks.retry,
        crate::clock::jitter(),
        now,
    )
    .await?;
    ctx.commit(tx).await?;
    Ok(row.status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_over_t_dot_body() {
        // RFC 4231-style check against a known HMAC-SHA256 value:
        // HMAC("key", "The quick brown fox jumps over the lazy dog").
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key").unwrap();
        mac.update(b"The quick brown fox jumps over the lazy dog");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
        let s = signature(b"k", 1700000000, b"{}");
        assert!(s.starts_with("t=1700000000,v1="));
        assert_eq!(s.len(), "t=1700000000,v1=".len() + 64);
    }
}
