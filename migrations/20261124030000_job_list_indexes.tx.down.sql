DROP INDEX jobs_owner;
--bun:split
DROP INDEX jobs_created_id;
