-- The system's jobs (a schedule's or a policy's firings) have no owner id,
-- and NULLs are never equal in a unique index: two attempts of one firing
-- could both create its job. Keys left twice by such a race are kept on
-- the first job only. The index covers exactly the jobs GetJobByKey looks
-- up for the system.
UPDATE jobs SET idempotency_key = NULL
WHERE owner_id IS NULL AND owner_type = 'system' AND idempotency_key IS NOT NULL
  AND id NOT IN (SELECT MIN(id) FROM jobs WHERE owner_id IS NULL AND owner_type = 'system' AND idempotency_key IS NOT NULL GROUP BY idempotency_key);
--bun:split
CREATE UNIQUE INDEX jobs_system_idempotency_key ON jobs (idempotency_key) WHERE owner_id IS NULL AND owner_type = 'system' AND idempotency_key IS NOT NULL;
