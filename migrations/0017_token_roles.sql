-- Issue 34: a token's role and the projects it may act in. Every token
-- that exists keeps its power: operator tokens (and pamd's admin token)
-- become `admin`, worker tokens `worker`. An empty project list means
-- every project, which only an admin token may have.
ALTER TABLE api_tokens
    ADD COLUMN role TEXT NOT NULL DEFAULT 'admin'
        CHECK (role IN ('admin', 'operator', 'viewer', 'worker')),
    ADD COLUMN projects TEXT[] NOT NULL DEFAULT '{}';
UPDATE api_tokens SET role = 'worker' WHERE kind = 'worker';
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_kind CHECK ((kind = 'worker') = (role = 'worker')),
    ADD CONSTRAINT api_tokens_role_projects CHECK (role IN ('admin', 'worker') OR cardinality(projects) > 0);
