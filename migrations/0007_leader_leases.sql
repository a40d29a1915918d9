-- Leader election for pamd replicas (issue 15): one row per lease (the
-- reconcile loops' is 'loops'), taken and renewed with a TTL like a
-- Kubernetes Lease. `term` grows each time another process takes the
-- lease: every loop write checks it (the fencing token), so an old leader
-- that wakes up after a pause writes nothing.
CREATE TABLE leader_leases (
    name        text PRIMARY KEY,
    -- The replica (stable across its restarts: pamd's data dir).
    holder      text NOT NULL,
    -- The process: a new process of the same replica takes over at once,
    -- with a new term.
    instance    uuid NOT NULL,
    term        bigint NOT NULL CHECK (term >= 1),
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
