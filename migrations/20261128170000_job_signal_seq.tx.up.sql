-- Each pause or resume of a job takes the next number of its job, which
-- its workflow uses to apply the last one asked for (signals can reach it
-- in another order).
ALTER TABLE jobs ADD COLUMN signal_seq BIGINT NOT NULL DEFAULT 0;
