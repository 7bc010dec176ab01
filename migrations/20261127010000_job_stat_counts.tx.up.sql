-- The number and bytes of each job's latest path outcomes of each state
-- and code, kept by the code that writes the outcomes (RecordOutcomes, by
-- delta in each batch's transaction; RefreshJobCounts recounts a job), so
-- a job's statistics read a few rows instead of its million paths.
CREATE TABLE job_stat_counts (
    job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    state TEXT NOT NULL,
    code TEXT NOT NULL,
    n BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    PRIMARY KEY (job_id, state, code)
);
--bun:split
INSERT INTO job_stat_counts (job_id, state, code, n, bytes)
SELECT job_id, state, code, COUNT(*), COALESCE(SUM(size), 0) FROM job_stats GROUP BY job_id, state, code;
