ALTER TABLE job_stats DROP COLUMN size;
--bun:split
DROP TABLE site_answers;
