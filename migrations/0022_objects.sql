-- Issue 29: one table for every kind whose objects are metadata, a spec
-- and a status (no columns of their own, no rows hanging off them), as
-- Kubernetes keeps every kind in one store. The kind's registry row
-- (pam_manifests::kinds::info) says it is stored here; its Rust type
-- parses the spec at the edge and the table holds it as JSON. The first
-- such kind is `Role` (issue 34: custom roles).
--
-- project_id is NULL for a cluster-scoped kind. A project-scoped object
-- goes with its project (as Secrets and Schedules do); the one prune never
-- cascades to it unseen: a project holding one is kept (Stored::held).
CREATE TABLE objects (
    id UUID PRIMARY KEY,
    kind TEXT NOT NULL,
    project_id UUID REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    spec JSONB NOT NULL DEFAULT '{}'::jsonb,
    labels JSONB NOT NULL DEFAULT '{}'::jsonb,
    annotations JSONB NOT NULL DEFAULT '{}'::jsonb,
    generation BIGINT NOT NULL DEFAULT 1,
    resource_version BIGINT NOT NULL DEFAULT 1,
    observed_generation BIGINT NOT NULL DEFAULT 0,
    conditions JSONB NOT NULL DEFAULT '[]'::jsonb,
    status JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- A name is unique per kind in its scope; NULL (cluster scope) counts as
-- one scope, hence the all-zero uuid in its place.
CREATE UNIQUE INDEX objects_kind_project_id_name_key ON objects
    (kind, COALESCE(project_id, '00000000-0000-0000-0000-000000000000'::uuid), name);
CREATE INDEX objects_project_id ON objects (project_id) WHERE project_id IS NOT NULL;

-- Issue 34: a token's role is a built-in one or the name of a Role object
-- (a custom role, stored above); a custom role's projects are its rules',
-- so only operator and viewer tokens list projects of their own. A
-- token whose Role is deleted keeps the name and has no rights.
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_check
        CHECK (role ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' AND length(role) <= 63);
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_projects;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_projects
        CHECK (role NOT IN ('operator', 'viewer') OR cardinality(projects) > 0);
