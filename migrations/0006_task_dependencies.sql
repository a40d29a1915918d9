-- Task dependencies (issue 17): a Task's spec.dependsOn, one row per link.
-- Both ends are tasks of the same project (checked by the store, like a
-- parent's project); cycles are refused by apply's whole-batch validation.
CREATE TABLE work_item_deps (
    task_id UUID NOT NULL REFERENCES work_items(id) ON DELETE CASCADE,
    depends_on_id UUID NOT NULL REFERENCES work_items(id) ON DELETE CASCADE,
    project_id UUID NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    -- position in spec.dependsOn
    ord INT NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, depends_on_id),
    CHECK (task_id <> depends_on_id)
);
-- "what waits for this task" (describe, the gate after a status change)
CREATE INDEX work_item_deps_depends_on_id ON work_item_deps(depends_on_id);

-- The dispatch gate. A pending run of a task with a dependency that is not
-- done is blocked: dispatchable_since IS NULL. Otherwise it is when the run
-- became dispatchable — pending_since at insert or requeue, or when the
-- last dependency became done — and the dispatch timeout (OQ-15) counts
-- from it, so waiting for dependencies never expires a run. pending_since
-- keeps the seed's meaning (created_at at insert, reset on requeue).
ALTER TABLE runs ADD COLUMN dispatchable_since TIMESTAMPTZ;
UPDATE runs SET dispatchable_since = pending_since WHERE status = 'pending';

-- The claim reads only dispatchable pending runs, oldest first; the
-- gating pass reads only blocked ones.
CREATE INDEX runs_dispatchable ON runs(dispatchable_since, id)
    WHERE status = 'pending' AND dispatchable_since IS NOT NULL;
CREATE INDEX runs_blocked ON runs(task_id)
    WHERE status = 'pending' AND dispatchable_since IS NULL;
