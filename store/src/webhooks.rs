//! Outbound webhooks: [`Webhook`] rows (declarative, like a
//! Source) and their [`Delivery`] queue, and the [`WebhookTx`] calls.
//!
//! # Guarantees
//! - Deliveries are inserted by the caller in the transaction that appends
//!   their events (pamd's `Ctx::commit`), so they commit, or roll back,
//!   with them: a committed event matching a webhook always has its
//!   delivery row.
//! - `(webhook, event seq)` is unique: an event is queued once per webhook.
//! - An attempt's outcome is written only while the delivery is pending at
//!   the attempt count the sender read ([`WebhookTx::record_delivery`]);
//!   otherwise Conflict (a redelivery or another sender got there first).
//! - Deleting a webhook deletes its deliveries.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::{Meta, StoreResult};

/// A Webhook: its desired state (`meta.spec`: url, topics, projects,
/// signingSecretRef).
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub id: Uuid,
    /// Operator name, unique.
    pub name: String,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Waiting for its (next) attempt at `next_attempt_at`.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Retries ran out (the retry window passed); `redeliver` queues it
    /// again.
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryStatus> {
        match s {
            "pending" => Some(DeliveryStatus::Pending),
            "delivered" => Some(DeliveryStatus::Delivered),
            "failed" => Some(DeliveryStatus::Failed),
            _ => None,
        }
    }
}

/// One event queued for one webhook.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub id: Uuid,
    pub webhook_id: Uuid,
    /// The event's journal seq (deliveries of a webhook go out in this
    /// order).
    pub event_seq: i64,
    pub topic: String,
    /// The thin body sent, as JSON.
    pub payload: Value,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i32,
    /// Pending: when the next attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// The last response's HTTP status (None: no response).
    pub last_code: Option<i32>,
    pub last_error: String,
    pub created_at: DateTime<Utc>,
}

/// An attempt's outcome, as [`WebhookTx::record_delivery`] writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryOutcome {
    pub status: DeliveryStatus,
    /// The attempt count after this attempt.
    pub attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub at: DateTime<Utc>,
    pub code: Option<i32>,
    pub error: String,
}

/// Which deliveries a listing shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeliveryFilter {
    pub webhook_id: Option<Uuid>,
    pub status: Option<DeliveryStatus>,
    /// At most this many, newest (highest seq) first.
    pub limit: i64,
}

/// Webhooks (`webhooks`, `webhook_deliveries`). Part of every [`crate::Tx`].
#[async_trait]
pub trait WebhookTx: Send {
    /// Every Webhook with the ids of the projects its `spec.projects`
    /// names that exist (the fan-out's view, read in the appending
    /// transaction).
    async fn webhook_targets(&mut self) -> StoreResult<Vec<(Webhook, Vec<Uuid>)>>;

    /// Queues deliveries (one statement). A `(webhook, seq)` already
    /// queued is skipped.
    async fn insert_deliveries(&mut self, rows: &[Delivery]) -> StoreResult<()>;
    async fn get_delivery(&mut self, id: Uuid) -> StoreResult<Option<Delivery>>;
    /// A webhook's pending deliveries in seq order, at most `limit`: the
    /// head of its queue.
    async fn pending_deliveries(&mut self, webhook: Uuid, limit: i64)
        -> StoreResult<Vec<Delivery>>;
    /// The webhooks with a pending delivery due at `now`.
    async fn webhooks_due(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<Uuid>>;
    /// Writes an attempt's outcome where the delivery is pending at
    /// `outcome.attempts - 1` attempts; Conflict otherwise.
    async fn record_delivery(
        &mut self,
        id: Uuid,
        outcome: &DeliveryOutcome,
    ) -> StoreResult<Delivery>;
    /// Queues a delivery again: pending, due `now` (its attempts kept).
    async fn redeliver(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<Delivery>;
    /// Deliveries by the filter, newest first.
    async fn list_deliveries(&mut self, f: &DeliveryFilter) -> StoreResult<Vec<Delivery>>;
    /// (pending, failed) per webhook, for status; webhooks with neither are
    /// absent.
    async fn delivery_counts(&mut self) -> StoreResult<HashMap<Uuid, (u64, u64)>>;
    /// Deletes delivered and failed deliveries created before `cutoff`;
    /// returns how many.
    async fn purge_deliveries_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64>;
}

crate::named::row!(Webhook);

impl crate::NamedKind for Webhook {
    type Scope = ();
    const NOUN: &'static str = "webhook";
    fn scope(&self) {}
    /// Named by its name, as its operator knows it.
    fn what(&self) -> String {
        format!("{} {}", Self::NOUN, self.name)
    }
}
