//! Each table of named objects: its name and row mapping ([`Named`]) and,
//! for the kinds whose calls are all [`crate::NamedTx`]'s, what its insert
//! and update write ([`Table`]); the row mapping functions themselves are
//! in `rows.rs`.

use super::named::{Named, PgQuery, Table};
use super::*;
use crate::{Object, Schedule, Secret, Webhook};

impl Named for Project {
    const TABLE: &'static str = "projects";
    const NAME: &'static str = "slug";
    const ORDER: &'static str = "slug COLLATE \"C\"";
    fn cols() -> String {
        project_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        project_from_row(row)
    }
}

impl Table for Project {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(&self.slug);
        bind_meta!(self.bind_own(q), self.meta)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    const OWN: &'static [&'static str] = &["name", "description", "status"];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.name.clone())
            .bind(self.description.clone())
            .bind(self.status.as_str())
    }
}

impl Named for Host {
    const TABLE: &'static str = "hosts";
    fn cols() -> String {
        host_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        host_from_row(row)
    }
}

impl Table for Host {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(&self.name).bind(self.status.as_str());
        bind_meta!(self.bind_own(q), self.meta)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    /// Every column but the name and status ([`HostTx::set_host_status`]).
    const OWN: &'static [&'static str] = &[
        "platform",
        "token_fingerprint",
        "instance_id",
        "instance_suspect",
        "instance_flagged_at",
        "last_seen_at",
        "capacity",
        "disabled",
        "presented_instance_id",
        "dispatch_labels",
        "worker_labels",
        "capabilities",
    ];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.platform.as_str())
            .bind(self.token_fingerprint.clone())
            .bind(self.instance_id)
            .bind(self.instance_suspect)
            .bind(self.instance_flagged_at)
            .bind(self.last_seen_at)
            .bind(self.capacity)
            .bind(self.disabled)
            .bind(self.presented_instance_id)
            .bind(labels_to_json(&self.dispatch_labels))
            .bind(labels_to_json(&self.worker_labels))
            .bind(capabilities_to_json(&self.capabilities))
    }
}

impl Named for Source {
    const TABLE: &'static str = "sources";
    fn cols() -> String {
        source_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        source_from_row(row)
    }
}

/// Its status is the sync loop's: a new Source starts from the table's
/// defaults.
impl Table for Source {
    fn insert_cols() -> String {
        format!("id, name, {META_COLS}, created_at, updated_at")
    }
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        bind_meta!(q.bind(self.id).bind(&self.name), self.meta)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

impl Named for Webhook {
    const TABLE: &'static str = "webhooks";
    fn cols() -> String {
        webhook_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        webhook_from_row(row)
    }
}

impl Table for Webhook {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        bind_meta!(q.bind(self.id).bind(&self.name), self.meta)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

impl Named for Secret {
    const TABLE: &'static str = "secrets";
    fn cols() -> String {
        secret_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        secret_from_row(row)
    }
}

impl Table for Secret {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(self.project_id).bind(&self.name);
        self.bind_own(bind_meta!(q, self.meta))
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    const OWN: &'static [&'static str] = &["salt", "key_id", "nonce", "ciphertext"];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.salt.clone())
            .bind(self.key_id.clone())
            .bind(self.nonce.clone())
            .bind(self.ciphertext.clone())
    }
}

impl Named for Schedule {
    const TABLE: &'static str = "schedules";
    fn cols() -> String {
        schedule_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        schedule_from_row(row)
    }
}

/// `last_schedule_time` is inserted, and then written only by
/// [`ScheduleTx::take_tick`].
impl Table for Schedule {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(self.project_id).bind(&self.name);
        bind_meta!(q, self.meta)
            .bind(self.last_schedule_time)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}

impl Named for Object {
    const TABLE: &'static str = "objects";
    fn cols() -> String {
        object_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        object_from_row(row)
    }
}

impl Table for Object {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q
            .bind(self.id)
            .bind(&self.kind)
            .bind(self.project_id)
            .bind(&self.name);
        self.bind_own(bind_meta!(q, self.meta))
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    const OWN: &'static [&'static str] = &["status"];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.status.clone())
    }
}

impl Named for WorkItem {
    const TABLE: &'static str = "work_items";
    /// Tree order: a parent before its children, siblings by `sort_order`.
    const ORDER: &'static str = "path COLLATE \"C\", sort_order, id";
    fn cols() -> String {
        work_item_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        work_item_from_row(row)
    }
}

impl Named for Run {
    const TABLE: &'static str = "runs";
    fn cols() -> String {
        run_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        run_from_row(row)
    }
}
