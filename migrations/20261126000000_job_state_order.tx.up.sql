-- The jobs list filtered by one state reads the jobs of that state in the
-- list's order (newest first) instead of sorting all of them.
CREATE INDEX jobs_state_created_id ON jobs (state, created, id);
--bun:split
DROP INDEX jobs_state;
