-- Workspace results (issue 32): what each attempt's git worktree came to
-- when its provider exited, as its worker reported it in the `finished`
-- signal (applied once, under that signal's marker). The patch is kept up
-- to the worker's `[workspaces] patch_max_bytes` (cut, and said so, when
-- longer), and goes with its run (retention, delete) by the cascade.
CREATE TABLE run_results (
    run_id UUID NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt INT NOT NULL CHECK (attempt >= 1),
    branch TEXT NOT NULL,
    base_commit TEXT NOT NULL,
    head_commit TEXT NOT NULL,
    commits INT NOT NULL CHECK (commits >= 0),
    files_changed INT NOT NULL CHECK (files_changed >= 0),
    insertions BIGINT NOT NULL CHECK (insertions >= 0),
    deletions BIGINT NOT NULL CHECK (deletions >= 0),
    patch TEXT NOT NULL,
    patch_truncated BOOLEAN NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    -- `push: true` only: whether the repository took the branch, and
    -- git's words when it did not (a refused push is a result, not a
    -- failure of the run)
    pushed BOOLEAN,
    push_message TEXT,
    PRIMARY KEY (run_id, attempt)
);
