DROP INDEX IF EXISTS job_stat_history_task;
