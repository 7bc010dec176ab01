DROP TABLE job_stat_history;
--bun:split
DROP TABLE job_stats;
--bun:split
DROP TABLE tasks;
--bun:split
DROP TABLE jobs;
