use super::*;

use crate::{JournalPage, Position};
use std::sync::LazyLock;

/// An event row's columns, as [`event_from_row`] reads them.
const EVENT_COLS: &str = "xid, seq, topic, payload, created_at";

/// The journal's horizon: the oldest transaction id still in flight in
/// the statement's snapshot (`xmin`). Every transaction below it has
/// committed or rolled back, so every event row below it that the
/// snapshot shows is final, and no row can ever appear below it again.
/// The session's own transaction counts as in flight (PostgreSQL includes
/// it in `xmin`): a transaction never reads its own events as journal.
const HORIZON: &str = "(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint";

#[async_trait]
impl EventTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn append_event(
        &mut self,
        topic: &str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Event> {
        let payload = crate::events::with_actor(payload);
        self.lock_event_order().await?;
        let row = sqlx::query(
            "INSERT INTO events (topic, payload, created_at) VALUES ($1, $2, $3) \
             RETURNING xid, seq, topic, payload, created_at",
        )
        .bind(topic)
        .bind(&payload)
        .bind(now)
        .fetch_one(self.conn())
        .await
        .map_err(db_err)?;
        let ev = event_from_row(&row)?;
        self.events.push(&ev);
        Ok(ev)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn append_events(
        &mut self,
        events: Vec<(&'static str, Value)>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Event>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        self.lock_event_order().await?;
        let created_at = {
            use chrono::SubsecRound;
            now.trunc_subsecs(6)
        };
        let mut out = Vec::with_capacity(events.len());
        let mut events = events.into_iter().peekable();
        while events.peek().is_some() {
            let chunk: Vec<(&'static str, Value)> = events
                .by_ref()
                .take(5000)
                .map(|(t, p)| (t, crate::events::with_actor(p)))
                .collect();
            // WITH ORDINALITY + ORDER BY: rows are inserted, and their seqs
            // drawn, in input order; only the seqs come back (the topics
            // and payloads are ours: no JSON to decode again).
            // Each payload is written out once: its text is both the
            // parameter and what the transaction keeps until commit
            // (`Journaled`).
            let texts: Vec<String> = chunk.iter().map(|(_, p)| p.to_string()).collect();
            let mut seqs: Vec<(i64, i64)> = sqlx::query_as(
                "INSERT INTO events (topic, payload, created_at) \
                 SELECT t, p::jsonb, $3 FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS u(t, p, i) \
                 ORDER BY i RETURNING seq, xid",
            )
            .bind(chunk.iter().map(|(t, _)| *t).collect::<Vec<_>>())
            .bind(&texts)
            .bind(now)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
            seqs.sort_unstable();
            for (((seq, xid), (topic, payload)), text) in seqs.into_iter().zip(chunk).zip(texts) {
                self.events.push_text(xid, seq, topic, text, created_at);
                out.push(Event {
                    xid,
                    seq,
                    topic: topic.to_string(),
                    payload,
                    created_at,
                });
            }
        }
        Ok(out)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn journal_after(&mut self, after: Position, limit: i64) -> StoreResult<Vec<Event>> {
        self.rows(
            sqlx::query(&JOURNAL_SQL)
                .bind(after.xid)
                .bind(after.seq)
                .bind(limit),
            event_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn journal_held(&mut self) -> StoreResult<bool> {
        sqlx::query_scalar(&HELD_SQL)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn journal_end(&mut self) -> StoreResult<Position> {
        let row: Option<(i64, i64)> = sqlx::query_as(&format!(
            "SELECT xid, seq FROM events WHERE xid < {HORIZON} \
             ORDER BY xid DESC, seq DESC LIMIT 1"
        ))
        .fetch_optional(self.conn())
        .await
        .map_err(db_err)?;
        Ok(row.map_or(Position::START, |(xid, seq)| Position { xid, seq }))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn journal_position(&mut self, seq: i64) -> StoreResult<Position> {
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT xid, seq FROM events WHERE seq <= $1 ORDER BY seq DESC LIMIT 1")
                .bind(seq)
                .fetch_optional(self.conn())
                .await
                .map_err(db_err)?;
        Ok(row.map_or(Position::START, |(xid, seq)| Position { xid, seq }))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>> {
        self.rows(
            sqlx::query(&format!(
                "SELECT {EVENT_COLS} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"
            ))
            .bind(after)
            .bind(limit),
            event_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn run_events_of_topic(&mut self, topic: &str, runs: &[Uuid]) -> StoreResult<Vec<Event>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = runs.iter().map(Uuid::to_string).collect();
        self.rows(
            sqlx::query(&format!(
                "SELECT {EVENT_COLS} FROM events \
             WHERE topic = $1 AND payload->>'run_id' = ANY($2) ORDER BY seq"
            ))
            .bind(topic)
            .bind(&ids),
            event_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn sessions_journaled(
        &mut self,
        topic: &str,
        host: Uuid,
        sessions: &[String],
    ) -> StoreResult<Vec<String>> {
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        // events_topic_created_at narrows this to the topic's rows (orphans
        // are rare), then the payload fields are compared.
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT DISTINCT payload->>'session_name' FROM events \
             WHERE topic = $1 AND payload->>'host_id' = $2 \
             AND payload->>'session_name' = ANY($3)",
        )
        .bind(topic)
        .bind(host.to_string())
        .bind(sessions)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        Ok(rows.into_iter().map(|(s,)| s).collect())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn run_events(&mut self, run: Uuid, after: i64, limit: i64) -> StoreResult<Vec<Event>> {
        self.rows(
            sqlx::query(&format!(
                "SELECT {EVENT_COLS} FROM events \
             WHERE payload->>'run_id' = $1 AND seq > $2 ORDER BY seq LIMIT $3"
            ))
            .bind(run.to_string())
            .bind(after)
            .bind(limit),
            event_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn purge_events_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let q = sqlx::query("DELETE FROM events WHERE created_at < $1").bind(cutoff);
        self.exec(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn event_bounds(&mut self) -> StoreResult<Option<(i64, i64)>> {
        let row = sqlx::query("SELECT min(seq) AS lo, max(seq) AS hi FROM events")
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        let lo: Option<i64> = get(&row, "lo")?;
        let hi: Option<i64> = get(&row, "hi")?;
        Ok(lo.zip(hi))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn event_high_water(&mut self) -> StoreResult<i64> {
        // Taken exclusively, the append lock waits out every append in
        // flight (each holds it shared from its first append to commit or
        // rollback).
        let q = sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(EVENT_LOCK_KEY);
        self.exec(q).await?;
        let name: String = sqlx::query_scalar("SELECT pg_get_serial_sequence('events', 'seq')")
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        // `name` comes from the catalog, already quoted.
        let sql = format!("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {name}");
        sqlx::query_scalar(&sql)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)
    }
}

/// Whether committed events wait past the horizon: the newest `xid`
/// against it, one probe of `events_xid_seq`'s last entry whatever the
/// statistics say. (An `EXISTS` over `xid >= horizon` was planned as a
/// sequential scan of the whole journal while its statistics were stale,
/// on every page the reader read.)
/// Made once, as the other statements below: the reader runs them on
/// every page.
static HELD: LazyLock<String> =
    LazyLock::new(|| format!("COALESCE((SELECT max(xid) FROM events) >= {HORIZON}, false)"));

/// [`EventTx::journal_held`]'s statement.
static HELD_SQL: LazyLock<String> = LazyLock::new(|| format!("SELECT {}", *HELD));

/// [`EventTx::journal_after`]'s statement ($1, $2: the position after
/// which; $3: the limit). The `events_xid_seq` index serves both bounds.
static JOURNAL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EVENT_COLS} FROM events \
         WHERE (xid, seq) > ($1, $2) AND xid < {HORIZON} ORDER BY xid, seq LIMIT $3"
    )
});

/// [`read_journal`]'s statement: a page, then the held flag.
static READ_JOURNAL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH page AS ({}) \
         SELECT {EVENT_COLS}, NULL::bool AS held FROM page \
         UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, {}",
        *JOURNAL_SQL, *HELD
    )
});

/// [`crate::Store::read_journal`] on PostgreSQL: the page and whether
/// committed events wait past the horizon, in one statement on the pool
/// (no `BEGIN`/`COMMIT` around it: the replicas' reader runs after every
/// journaling commit). Both halves see one snapshot, hence one horizon.
pub(super) async fn read_journal(
    pool: &PgPool,
    after: Position,
    limit: i64,
) -> StoreResult<JournalPage> {
    let rows = sqlx::query(&READ_JOURNAL_SQL)
        .bind(after.xid)
        .bind(after.seq)
        .bind(limit)
        .fetch_all(pool)
        .await
        .map_err(db_err)?;
    let mut page = JournalPage::default();
    for row in &rows {
        match get::<Option<bool>>(row, "held")? {
            Some(held) => page.held = held,
            None => page.events.push(event_from_row(row)?),
        }
    }
    // UNION ALL keeps each side's order in practice; the order is the
    // journal's promise, so it is not left to the plan.
    page.events.sort_by_key(Event::position);
    Ok(page)
}

/// [`crate::Store::journal_barrier`] on PostgreSQL: every transaction id
/// below the snapshot's `xmax` now was handed out already; once the
/// horizon reaches it, each of them has ended. Polled (1 ms, doubling to
/// 16 ms): transactions end in milliseconds, and nothing notifies a
/// rollback.
pub(super) async fn journal_barrier(pool: &PgPool, limit: std::time::Duration) -> StoreResult<()> {
    let until = std::time::Instant::now() + limit;
    let xmax: i64 =
        sqlx::query_scalar("SELECT (pg_snapshot_xmax(pg_current_snapshot())::text)::bigint")
            .fetch_one(pool)
            .await
            .map_err(db_err)?;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        let horizon: i64 = sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(pool)
            .await
            .map_err(db_err)?;
        if horizon >= xmax || std::time::Instant::now() >= until {
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(16));
    }
}
