-- Managed fields (issue 35, issue 34's lastAppliedBy/At): per object, which
-- field paths each manager (`apply:TOKEN`, `label:TOKEN`, `source:NAME`, …)
-- set, with the operation and when. One row per object, its managers as a
-- JSON array ([{manager, operation, time, fields: ["spec.title",
-- "metadata.labels.tier", …]}]), written in bulk by apply. object_id names
-- a row of the kind's table (no FK, as source_objects: ids are never
-- reused, so a row left by a deleted object names nothing).
CREATE TABLE managed_fields (
    kind TEXT NOT NULL,
    object_id UUID NOT NULL,
    entries JSONB NOT NULL,
    PRIMARY KEY (kind, object_id)
);
