ALTER TABLE jobs DROP COLUMN snapdiff_pending;
