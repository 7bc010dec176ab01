ALTER TABLE jobs DROP COLUMN policy_id;
--bun:split
DROP TABLE policies;
--bun:split
DROP TABLE schedule_workflows;
--bun:split
DROP TABLE schedules;
