CREATE INDEX jobs_state ON jobs (state);
--bun:split
DROP INDEX jobs_state_created_id;
