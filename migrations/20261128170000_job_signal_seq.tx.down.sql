ALTER TABLE jobs DROP COLUMN signal_seq;
