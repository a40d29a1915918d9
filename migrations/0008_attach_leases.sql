-- Attach leases and their queued input in PostgreSQL (issue 15): any pamd
-- replica answers any attach request — acquire through one, renew, type
-- and release through another; nothing is lost with a replica.
CREATE TABLE attach_leases (
    run_id       uuid PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    id           uuid NOT NULL UNIQUE,
    attempt      integer NOT NULL,
    holder       text NOT NULL,
    ttl_ms       bigint NOT NULL CHECK (ttl_ms > 0),
    -- The acquirer's token: its revocation releases the lease.
    token_id     uuid REFERENCES api_tokens(id) ON DELETE SET NULL,
    acquired_at  timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX attach_leases_expires ON attach_leases (expires_at);

-- Lines typed under a lease, until the run's worker takes them.
CREATE TABLE attach_input (
    seq      bigserial PRIMARY KEY,
    run_id   uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    attempt  integer NOT NULL,
    text     text NOT NULL
);
CREATE INDEX attach_input_run ON attach_input (run_id, seq);
