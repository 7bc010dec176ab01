DROP TABLE job_stat_counts;
