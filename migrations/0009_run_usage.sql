-- Token usage and cost per run (issue 21). The attempt_* columns are the
-- current attempt's figures (reset on the restart requeue, like the other
-- per-attempt columns); the total_* columns are every attempt's together
-- and are never reset. Cost is kept in micro-dollars (1e-6 USD) so sums
-- are exact. Signal ingest writes them: a progress signal adds its step's
-- usage (only when it advances last_progress_seq, so a replay never counts
-- twice); the one-shot finished signal replaces the attempt's figures with
-- the provider's final totals.
ALTER TABLE runs
    ADD COLUMN attempt_input_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN attempt_cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN attempt_output_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN attempt_cost_micro_usd BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN total_input_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN total_cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN total_output_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN total_cost_micro_usd BIGINT NOT NULL DEFAULT 0;
