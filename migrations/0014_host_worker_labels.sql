-- Issue 30: the labels a worker reports for itself get their own column
-- and their own namespace (`worker.pam.dev/<name>`), so they can never
-- satisfy a selector on the labels an operator sets (metadata.labels, a
-- Host's spec.labels, which dispatch_labels now holds alone).
ALTER TABLE hosts ADD COLUMN worker_labels JSONB NOT NULL DEFAULT '{}'::jsonb;

-- A host no Host manifest declares (no spec.platform) kept its worker's
-- report in dispatch_labels: move it into the namespace, by the key's name
-- part. The worker sends its report again when it next registers.
UPDATE hosts
SET worker_labels = COALESCE(
        (SELECT jsonb_object_agg('worker.pam.dev/' || regexp_replace(l.key, '^.*/', ''), l.value)
         FROM jsonb_each(hosts.dispatch_labels) AS l),
        '{}'::jsonb),
    dispatch_labels = '{}'::jsonb
WHERE NOT (spec ? 'platform') AND dispatch_labels <> '{}'::jsonb;
