-- GitOps Sources (ARCHITECTURE.md, "Sources"): where desired state lives
-- (a directory on pamd's host or a git repository, in spec), and what the
-- sync loop observed. Declarative metadata columns as for every kind.
CREATE TABLE sources (
    id UUID PRIMARY KEY,
    name TEXT UNIQUE NOT NULL,
    spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    generation BIGINT NOT NULL DEFAULT 1,
    resource_version BIGINT NOT NULL DEFAULT 1,
    observed_generation BIGINT NOT NULL DEFAULT 0,
    conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- the last revision applied in full, and the last one tried
    revision TEXT,
    attempted_revision TEXT,
    last_synced_at TIMESTAMPTZ,
    last_attempt_at TIMESTAMPTZ,
    sync_status TEXT NOT NULL DEFAULT 'Unknown'
        CHECK (sync_status IN ('Unknown', 'Synced', 'OutOfSync', 'Failed')),
    sync_message TEXT NOT NULL DEFAULT '',
    health TEXT NOT NULL DEFAULT 'Unknown'
        CHECK (health IN ('Unknown', 'Healthy', 'Progressing', 'Degraded')),
    health_message TEXT NOT NULL DEFAULT '',
    -- the last failed sync's positioned problems; [] after a good one
    errors JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- owned objects whose owned fields were changed by another path
    drift JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- `pamctl sync NAME`: sync now (cleared by the loop)
    sync_requested_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- A Source's inventory: the objects it owns, one owner per object, with
-- what its manifest declares of each (the keys are the owned fields).
-- object_id names a row of projects, work_items or runs by kind (no FK: a
-- row deleted behind the Source's back is reported as drift).
CREATE TABLE source_objects (
    source_id UUID NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('Project', 'Task', 'Run')),
    object_id UUID NOT NULL,
    project TEXT,
    name TEXT NOT NULL,
    declared JSONB NOT NULL,
    file TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (kind, object_id)
);
CREATE INDEX source_objects_source_id ON source_objects(source_id);
