use super::named::Table;
use super::*;
use crate::webhooks::{Delivery, DeliveryFilter, DeliveryOutcome, DeliveryStatus, Webhook};

#[async_trait]
impl WebhookTx for MemTx {
    async fn webhook_targets(&mut self) -> StoreResult<Vec<(Webhook, Vec<Uuid>)>> {
        let hooks: Vec<Webhook> = self.work.all_named(());
        Ok(hooks
            .into_iter()
            .map(|w| {
                let names: Vec<String> = w
                    .meta
                    .spec
                    .get("projects")
                    .and_then(|p| serde_json::from_value(p.clone()).ok())
                    .unwrap_or_default();
                let mut ids: Vec<Uuid> = self
                    .work
                    .projects
                    .values()
                    .filter(|p| names.contains(&p.slug))
                    .map(|p| p.id)
                    .collect();
                ids.sort();
                (w, ids)
            })
            .collect())
    }

    async fn insert_deliveries(&mut self, rows: &[Delivery]) -> StoreResult<()> {
        for d in rows {
            if !self.work.webhooks.contains_key(&d.webhook_id) {
                return Err(StoreError::NotFound(
                    "referenced row (webhook_deliveries_webhook_id_fkey)".into(),
                ));
            }
        }
        for d in rows {
            let st = &mut self.work;
            let taken = st
                .deliveries
                .values()
                .any(|o| o.webhook_id == d.webhook_id && o.event_seq == d.event_seq);
            if taken {
                continue;
            }
            let mut row = d.clone();
            row.status = DeliveryStatus::Pending;
            row.attempts = 0;
            row.next_attempt_at = Some(d.next_attempt_at.unwrap_or(d.created_at));
            row.last_attempt_at = None;
            row.last_code = None;
            row.last_error = String::new();
            st.deliveries.insert(d.id, row);
        }
        Ok(())
    }

    async fn get_delivery(&mut self, id: Uuid) -> StoreResult<Option<Delivery>> {
        Ok(self.work.deliveries.get(&id).cloned())
    }

    async fn pending_deliveries(
        &mut self,
        webhook: Uuid,
        limit: i64,
    ) -> StoreResult<Vec<Delivery>> {
        let mut v: Vec<Delivery> = self
            .work
            .deliveries
            .values()
            .filter(|d| d.webhook_id == webhook && d.status == DeliveryStatus::Pending)
            .cloned()
            .collect();
        v.sort_by_key(|d| d.event_seq);
        v.truncate(take(limit));
        Ok(v)
    }

    async fn webhooks_due(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<Uuid>> {
        let due: BTreeSet<Uuid> = self
            .work
            .deliveries
            .values()
            .filter(|d| {
                d.status == DeliveryStatus::Pending && d.next_attempt_at.is_some_and(|n| n <= now)
            })
            .map(|d| d.webhook_id)
            .collect();
        Ok(due.into_iter().collect())
    }

    async fn record_delivery(&mut self, id: Uuid, o: &DeliveryOutcome) -> StoreResult<Delivery> {
        let row = self
            .work
            .deliveries
            .get_mut(&id)
            .ok_or_else(|| not_found("webhook_deliveries", id))?;
        if row.status != DeliveryStatus::Pending || row.attempts != o.attempts - 1 {
            return Err(conflict(format!(
                "delivery {id} is not pending at attempt {}",
                o.attempts - 1
            )));
        }
        row.status = o.status;
        row.attempts = o.attempts;
        row.next_attempt_at = o.next_attempt_at;
        row.last_attempt_at = Some(o.at);
        row.last_code = o.code;
        row.last_error = o.error.clone();
        Ok(row.clone())
    }

    async fn redeliver(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<Delivery> {
        let row = self
            .work
            .deliveries
            .get_mut(&id)
            .ok_or_else(|| not_found("webhook_deliveries", id))?;
        row.status = DeliveryStatus::Pending;
        row.next_attempt_at = Some(now);
        Ok(row.clone())
    }

    async fn list_deliveries(&mut self, f: &DeliveryFilter) -> StoreResult<Vec<Delivery>> {
        let mut v: Vec<Delivery> = self
            .work
            .deliveries
            .values()
            .filter(|d| f.webhook_id.is_none_or(|w| d.webhook_id == w))
            .filter(|d| f.status.is_none_or(|s| d.status == s))
            .cloned()
            .collect();
        v.sort_by(|a, b| (b.event_seq, a.webhook_id).cmp(&(a.event_seq, b.webhook_id)));
        v.truncate(take(f.limit));
        Ok(v)
    }

    async fn delivery_counts(&mut self) -> StoreResult<HashMap<Uuid, (u64, u64)>> {
        let mut out: HashMap<Uuid, (u64, u64)> = HashMap::new();
        for d in self.work.deliveries.values() {
            match d.status {
                DeliveryStatus::Pending => out.entry(d.webhook_id).or_default().0 += 1,
                DeliveryStatus::Failed => out.entry(d.webhook_id).or_default().1 += 1,
                DeliveryStatus::Delivered => {}
            }
        }
        Ok(out)
    }

    async fn purge_deliveries_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let before = self.work.deliveries.len();
        self.work
            .deliveries
            .retain(|_, d| d.status == DeliveryStatus::Pending || d.created_at >= cutoff);
        Ok((before - self.work.deliveries.len()) as u64)
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(
    crate::Webhook,
    webhooks,
    "webhooks",
    "webhooks_name_key",
    name,
    |_w| None
);

impl Table for Webhook {
    /// Its deliveries go with it.
    fn on_delete(s: &mut State, id: Uuid) -> StoreResult<()> {
        s.deliveries.retain(|_, d| d.webhook_id != id);
        Ok(())
    }
}
