-- Additive columns for the declarative layer (ARCHITECTURE.md, "Manifests"):
-- per-project operator names, the applied spec, labels/annotations,
-- generation (bumps on spec change only), resource_version (optimistic
-- concurrency), observed status. UUIDs stay the database identity.

-- Every declarative kind carries the same metadata columns.
ALTER TABLE projects
    ADD COLUMN spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN generation BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN resource_version BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN observed_generation BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN conditions JSONB NOT NULL DEFAULT '[]'::jsonb;

ALTER TABLE work_items
    ADD COLUMN name TEXT NOT NULL,
    ADD COLUMN spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN generation BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN resource_version BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN observed_generation BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    ADD CONSTRAINT work_items_project_name UNIQUE (project_id, name);

-- A run belongs to its task's project; project_id is denormalized so run
-- names can be unique per project (the task never changes: it is immutable).
ALTER TABLE runs
    ADD COLUMN project_id UUID NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    ADD COLUMN name TEXT NOT NULL,
    ADD COLUMN prompt TEXT NOT NULL DEFAULT '',
    -- {"host": "name"} or {"selector": {"k": "v"}}; {} = any host
    ADD COLUMN target JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN max_attempts INT NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
    ADD COLUMN backoff_seconds INT NOT NULL DEFAULT 10 CHECK (backoff_seconds >= 0),
    ADD COLUMN backoff_max_seconds INT NOT NULL DEFAULT 300 CHECK (backoff_max_seconds >= 0),
    -- NULL = the controller's [dispatch] timeout_seconds
    ADD COLUMN dispatch_timeout_seconds INT CHECK (dispatch_timeout_seconds > 0),
    -- desired stop (spec.stopped); the worker confirms with running -> stopped
    ADD COLUMN stop_requested BOOLEAN NOT NULL DEFAULT false,
    -- when a failed run becomes eligible for its restart requeue (backoff)
    ADD COLUMN requeue_at TIMESTAMPTZ,
    -- set once any online, enabled, non-suspect host matched the target
    -- while pending; decides dispatch_timeout vs no_eligible_host (OQ-15)
    ADD COLUMN eligible_host_seen BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN generation BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN resource_version BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN observed_generation BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    ADD CONSTRAINT runs_project_name UNIQUE (project_id, name);

ALTER TABLE hosts
    ADD COLUMN capacity INT NOT NULL DEFAULT 4 CHECK (capacity >= 0),
    ADD COLUMN disabled BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN generation BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN resource_version BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN observed_generation BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN conditions JSONB NOT NULL DEFAULT '[]'::jsonb;

-- Loop indexes: each loop's cost grows with the rows that need action,
-- never with the size of history (partial indexes skip finished runs).
CREATE INDEX runs_pending ON runs(pending_since) WHERE status = 'pending';
CREATE INDEX runs_requeue ON runs(requeue_at) WHERE status = 'failed' AND requeue_at IS NOT NULL;
CREATE INDEX runs_live ON runs(host_id) WHERE status IN ('spawning', 'running');
CREATE INDEX runs_project_id ON runs(project_id);
CREATE INDEX hosts_online ON hosts(last_seen_at) WHERE status = 'online';
CREATE INDEX events_created_at ON events(created_at);

-- API tokens (operator and worker), stored as SHA-256 fingerprints only.
CREATE TABLE api_tokens (
    id UUID PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('operator', 'worker')),
    fingerprint TEXT UNIQUE NOT NULL,
    -- for worker tokens: the host name the token may act for
    host_name TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ,
    revoked_at TIMESTAMPTZ,
    CHECK ((kind = 'worker') = (host_name IS NOT NULL))
);
CREATE UNIQUE INDEX api_tokens_operator_name ON api_tokens(name) WHERE kind = 'operator' AND revoked_at IS NULL;
