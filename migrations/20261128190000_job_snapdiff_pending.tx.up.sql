-- The pending snapdiff manifest of a job's run that ended with failures,
-- committed when a resubmit of the job succeeds.
ALTER TABLE jobs ADD COLUMN snapdiff_pending TEXT NOT NULL DEFAULT '';
