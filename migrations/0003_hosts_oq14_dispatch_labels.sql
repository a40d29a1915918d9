-- OQ-14: while a host is instance-suspect, remember the newest instance_id
-- that presented itself, so `pamctl host clear-suspect` can pin it.
ALTER TABLE hosts ADD COLUMN presented_instance_id UUID;

-- Labels matched by run target selectors (Host spec.labels, or what the
-- worker reports at registration), kept apart from metadata.labels, which
-- select manifests (pamctl -l, prune).
ALTER TABLE hosts ADD COLUMN dispatch_labels JSONB NOT NULL DEFAULT '{}'::jsonb;
