-- The number of job_stats rows of each job, kept by the code that writes
-- them (RecordOutcomes, by delta; FinishJob recounts), so a job's stats
-- list counts its rows without reading a million of them.
ALTER TABLE jobs ADD COLUMN numstats BIGINT NOT NULL DEFAULT 0;
--bun:split
UPDATE jobs SET numstats = (SELECT COUNT(*) FROM job_stats WHERE job_stats.job_id = jobs.id);
