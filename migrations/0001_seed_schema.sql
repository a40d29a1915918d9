-- The seed's six tables, exactly as specified in pam-data-model.txt
-- ("Database Schema"). Enumeration-like columns are TEXT with CHECK
-- constraints; pam-manifests' enums remain the authority for legal values
-- and the state machines for legal transitions.
-- An applied migration is never edited: change the schema in a new file.

CREATE TABLE hosts (
    id UUID PRIMARY KEY,
    name TEXT UNIQUE NOT NULL,
    platform TEXT NOT NULL CHECK(platform IN ('macos', 'linux')),
    token_fingerprint TEXT,
    status TEXT NOT NULL CHECK(status IN ('registered', 'online', 'offline', 'disabled')),
    instance_id UUID,
    instance_suspect BOOLEAN NOT NULL DEFAULT false,
    instance_flagged_at TIMESTAMPTZ,
    last_seen_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE projects (
    id UUID PRIMARY KEY,
    name TEXT NOT NULL,
    slug TEXT UNIQUE NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK(status IN ('active', 'archived')),
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE work_items (
    id UUID PRIMARY KEY,
    project_id UUID NOT NULL,
    parent_id UUID,
    kind TEXT NOT NULL CHECK(kind IN ('milestone', 'epic', 'task', 'subtask')),
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK(status IN ('todo', 'doing', 'done', 'cancelled')),
    assignee TEXT,
    path TEXT NOT NULL,
    sort_order INTEGER NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE,
    FOREIGN KEY (parent_id) REFERENCES work_items(id) ON DELETE CASCADE,
    CHECK (parent_id IS NULL OR parent_id <> id)
);

CREATE TABLE runs (
    id UUID PRIMARY KEY,
    task_id UUID NOT NULL,
    host_id UUID,
    provider TEXT NOT NULL,
    session_name TEXT NOT NULL,
    status TEXT NOT NULL CHECK(status IN ('pending', 'spawning', 'running', 'exited', 'failed', 'stopped')),
    attempt INT NOT NULL DEFAULT 1,
    last_progress_seq BIGINT,
    failure_reason TEXT,
    pending_since TIMESTAMPTZ NOT NULL,
    cwd TEXT NOT NULL,
    exit_code INTEGER,
    started_at TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    FOREIGN KEY (task_id) REFERENCES work_items(id) ON DELETE CASCADE,
    FOREIGN KEY (host_id) REFERENCES hosts(id),
    UNIQUE (host_id, session_name)
);

CREATE TABLE processed_signals (
    run_id UUID NOT NULL,
    attempt INT NOT NULL,
    kind TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, attempt, kind),
    FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE
);

CREATE TABLE events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic TEXT NOT NULL,
    payload JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX work_items_project_id ON work_items(project_id);
CREATE INDEX work_items_parent_id ON work_items(parent_id);
CREATE INDEX work_items_path ON work_items(path text_pattern_ops);
CREATE INDEX runs_task_id ON runs(task_id);
CREATE INDEX runs_host_id ON runs(host_id);
CREATE INDEX events_topic_created_at ON events(topic, created_at);
