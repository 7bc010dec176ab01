-- The jobs list reads a page's ids and versions (models.JobRows) from the
-- index in its order alone, without visiting the rows.
DROP INDEX jobs_created_id;
--bun:split
CREATE INDEX jobs_created_id ON jobs (created, id, version);
--bun:split
DROP INDEX jobs_state_created_id;
--bun:split
CREATE INDEX jobs_state_created_id ON jobs (state, created, id, version);
