-- Issue 35: the objects that left a Source's tree at its last sync that
-- wrote (pruned, or kept: held by something pruning would cascade to,
-- or released with spec.prune false), so `get source` can list them as
-- Pruned/Held beside the owned objects. [{kind, project, name, sync,
-- health, message}], bounded by the sync (sync/apply.rs).
ALTER TABLE sources ADD COLUMN departed jsonb NOT NULL DEFAULT '[]';
