-- Outbound webhooks (issue 19). A Webhook is cluster-scoped and
-- declarative like a Source (its spec holds url, topics, projects and the
-- signing secret's reference, never the secret).
CREATE TABLE webhooks (
    id UUID PRIMARY KEY,
    name TEXT UNIQUE NOT NULL,
    spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    generation BIGINT NOT NULL DEFAULT 1,
    resource_version BIGINT NOT NULL DEFAULT 1,
    observed_generation BIGINT NOT NULL DEFAULT 0,
    conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- One row per (webhook, matching journal event), inserted in the
-- transaction that appends the event, so a committed event is never
-- without its deliveries (at-least-once across crashes). `payload` is the
-- thin body sent (delivery id, seq, topic, object reference, link), never
-- the object itself; it does not reference `events` (retention purges the
-- journal on its own schedule).
CREATE TABLE webhook_deliveries (
    id UUID PRIMARY KEY,
    webhook_id UUID NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_seq BIGINT NOT NULL,
    topic TEXT NOT NULL,
    payload JSONB NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- pending: when the next attempt is due
    next_attempt_at TIMESTAMPTZ,
    last_attempt_at TIMESTAMPTZ,
    -- the last response's HTTP status; NULL: none (timeout, refused)
    last_code INT,
    last_error TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (webhook_id, event_seq)
);
-- A webhook's queue, in seq order (the sender reads its head).
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, event_seq)
    WHERE status = 'pending';
-- What is due (the sender's scan).
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
-- Failed deliveries per webhook (status counts, `pamctl get webhooks`).
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (webhook_id)
    WHERE status = 'failed';
-- The newest first (`pamctl get webhookdeliveries` without a webhook).
CREATE INDEX webhook_deliveries_event_seq ON webhook_deliveries (event_seq);
-- Retention of finished deliveries.
CREATE INDEX webhook_deliveries_created_at ON webhook_deliveries (created_at);
