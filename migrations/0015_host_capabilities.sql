-- Issue 31: what a host's worker reports it can run (the providers whose
-- command it found and started, with their versions; its data volume's
-- free bytes). NULL until a worker that reports them registers: dispatch
-- then takes the host to run every provider, as before.
ALTER TABLE hosts ADD COLUMN capabilities JSONB;
