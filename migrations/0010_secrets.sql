-- Secrets (issue 18): named values of a project, encrypted at rest with
-- AES-256-GCM under a key pamd keeps outside the database (its key file).
-- Declarative metadata columns as for every kind; `spec` holds only each
-- key's name, size and digest, never a value.
CREATE TABLE secrets (
    id UUID PRIMARY KEY,
    project_id UUID NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    generation BIGINT NOT NULL DEFAULT 1,
    resource_version BIGINT NOT NULL DEFAULT 1,
    observed_generation BIGINT NOT NULL DEFAULT 0,
    conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- per-Secret salt of the digests `spec` shows (equal values in two
    -- Secrets get unrelated digests)
    salt BYTEA NOT NULL,
    -- which key of pamd's key file sealed `ciphertext`
    key_id TEXT NOT NULL,
    -- the AES-256-GCM nonce (96 bits) and the sealed values (a JSON map
    -- of key -> base64 value), with the GCM tag
    nonce BYTEA NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (project_id, name)
);
-- Key rotation finds what an old key still seals.
CREATE INDEX secrets_key_id ON secrets(key_id);

-- Pending runs whose environment names a Secret or key that does not
-- exist (issue 18): the claim skips them; the loop pass clears the row
-- once the Secret is applied. `message` names the Secret and key.
CREATE TABLE run_secret_waits (
    run_id UUID PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    message TEXT NOT NULL,
    since TIMESTAMPTZ NOT NULL
);
