-- Why an attempt failed, in words (issue 16): a spawn failure's cause as
-- the worker saw it ("run cwd /srv/x is not a directory on this host").
-- Per attempt like failure_reason: cleared on requeue. failure_reason stays
-- the machine-readable half (the seed's enumeration); this column only
-- explains it.
ALTER TABLE runs ADD COLUMN failure_message TEXT;
