ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
--bun:split
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (owner_id, idempotency_key);
