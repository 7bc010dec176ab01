-- A job's stats in their list order (by id), so a page reads its rows
-- in order instead of sorting every path of the job.
CREATE INDEX job_stats_job_order ON job_stats (job_id, id);
