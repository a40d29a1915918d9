-- An applyset's record of what it holds (kubectl's ApplySet parent and
-- its contains-group-kinds annotation): the kinds and projects of the
-- objects applied with `applyset`, so `--prune` covers a kind (or a
-- project) even after the input no longer has any object of it.
CREATE TABLE applysets (
    name TEXT PRIMARY KEY,
    kinds TEXT[] NOT NULL,
    projects TEXT[] NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
