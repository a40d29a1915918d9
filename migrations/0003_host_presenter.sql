-- OQ-14: while a host is instance-suspect, remember the newest instance_id
-- that presented itself, so `pamctl host clear-suspect` can pin it.
ALTER TABLE hosts ADD COLUMN presented_instance_id UUID;
