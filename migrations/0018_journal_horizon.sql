-- Issue 33: a journal without a global commit lock. Journaling
-- transactions no longer commit one at a time in seq order; each event
-- row records the transaction that appended it, and readers deliver in
-- (xid, seq) order only the events of transactions older than the oldest
-- one still in flight (pg_snapshot_xmin), so nothing can ever appear
-- before what a reader has passed. Existing rows get this migration's
-- transaction id: they keep their seq order, before every later event.
ALTER TABLE events
    ADD COLUMN xid bigint NOT NULL DEFAULT (pg_current_xact_id()::text)::bigint;

CREATE INDEX events_xid_seq ON events (xid, seq);
