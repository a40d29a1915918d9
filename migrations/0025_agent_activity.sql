-- What a run's agent may do and what it did. Small structured metadata
-- only: pane text, logs and transcripts stay on the worker's disk
-- (pam-data-model.txt, "Data Retention").
--
-- permissions: the run's permission policy as settled when it was created
-- (its own spec's, else its task's, else its project's, else mode edits),
-- with where it came from; NULL for runs created before this column, which
-- run with the provider CLI's own default.
-- session_id: the provider's session id of the current attempt (claude's
-- session_id, codex's thread_id), from which a later run can resume.
-- last_activity: the newest activity item of the current attempt.
-- denials: the tool calls the current attempt's agent was refused,
-- {"count", "items": [{tool, target}] (at most 10), "since"}; NULL while
-- none. The last three are per attempt: cleared on the restart requeue.
ALTER TABLE runs
    ADD COLUMN permissions jsonb,
    ADD COLUMN session_id TEXT,
    ADD COLUMN last_activity jsonb,
    ADD COLUMN denials jsonb;

-- The newest activity items of each attempt (at most 20, oldest first),
-- written by signal ingest from progress signals (only one that advances
-- last_progress_seq adds its items, so a replay adds nothing), read by
-- `describe run` and the dashboard. Goes with its run by the cascade.
CREATE TABLE run_activity (
    run_id UUID NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt INT NOT NULL CHECK (attempt >= 1),
    items jsonb NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, attempt)
);
