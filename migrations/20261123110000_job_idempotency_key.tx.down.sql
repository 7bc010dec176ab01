DROP INDEX jobs_idempotency_key;
--bun:split
ALTER TABLE jobs DROP COLUMN idempotency_key;
