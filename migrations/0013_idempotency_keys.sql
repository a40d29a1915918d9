-- Idempotency keys (issue 19): a mutating POST with `Idempotency-Key`
-- is done once per (caller, key); a retry within 24 h replays the stored
-- answer. Shared by every pamd replica, so a retry through another replica
-- or after a restart behaves the same.
CREATE TABLE idempotency_keys (
    -- the caller: its bearer token's SHA-256 fingerprint
    principal TEXT NOT NULL,
    -- SHA-256 (hex) of the Idempotency-Key header
    key_hash TEXT NOT NULL,
    -- SHA-256 (hex) of the method, path and query, and body
    request_hash TEXT NOT NULL,
    -- NULL while the first request is in progress
    response_status INT,
    -- NULL while in progress, and for answers holding a credential (a
    -- created token): those are never stored, a replay is refused
    response_body BYTEA,
    response_content_type TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    -- when the request in progress claimed the key (a claim older than
    -- the lease is taken over: its pamd died before answering)
    claimed_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (principal, key_hash)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
