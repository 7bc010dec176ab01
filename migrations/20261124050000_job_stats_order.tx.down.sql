DROP INDEX IF EXISTS job_stats_job_order;
