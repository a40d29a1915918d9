-- Schedules (issue 18): runs of a project started on a cron timetable.
-- Declarative metadata columns as for every kind; `spec` holds schedule,
-- timeZone, runTemplate, concurrencyPolicy, startingDeadlineSeconds,
-- suspend and the history limits.
CREATE TABLE schedules (
    id UUID PRIMARY KEY,
    project_id UUID NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    generation BIGINT NOT NULL DEFAULT 1,
    resource_version BIGINT NOT NULL DEFAULT 1,
    observed_generation BIGINT NOT NULL DEFAULT 0,
    conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- the last tick taken (a run created or the tick skipped); the loop
    -- moves it with a guarded update in the transaction that creates the
    -- tick's run, so a tick is taken once across restarts and replicas
    last_schedule_time TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (project_id, name)
);

-- The runs a Schedule created, one per tick (a manual trigger is a tick
-- at its own time): the primary key refuses a second run for a tick.
CREATE TABLE schedule_runs (
    schedule_id UUID NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    scheduled_at TIMESTAMPTZ NOT NULL,
    run_id UUID NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
    PRIMARY KEY (schedule_id, scheduled_at)
);
