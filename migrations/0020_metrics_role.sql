-- Issue 34: the `metrics` role: a token that may only scrape /metrics
-- (`[metrics] require_token`). Like an admin or a worker token it names
-- no projects.
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_check
        CHECK (role IN ('admin', 'operator', 'viewer', 'worker', 'metrics'));
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_projects;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_projects
        CHECK (role IN ('admin', 'worker', 'metrics') OR cardinality(projects) > 0);
