-- Who asked a run to stop (issue 34's audit: `run.stopped` names them as
-- its actor; the stop takes effect later, outside the request). It was the
-- annotation `pam.dev/stopped-by`, which a re-apply of the run's manifest
-- replaced (annotations no field manager owns follow the manifest, issue
-- 35), losing the actor; a column no apply writes keeps it.
ALTER TABLE runs ADD COLUMN stopped_by jsonb;
UPDATE runs SET stopped_by = (annotations->>'pam.dev/stopped-by')::jsonb,
                annotations = annotations - 'pam.dev/stopped-by'
 WHERE annotations ? 'pam.dev/stopped-by';
