DROP INDEX jobs_state_created_id;
--bun:split
CREATE INDEX jobs_state_created_id ON jobs (state, created, id);
--bun:split
DROP INDEX jobs_created_id;
--bun:split
CREATE INDEX jobs_created_id ON jobs (created, id);
