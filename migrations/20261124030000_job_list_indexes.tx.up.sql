-- The jobs list: its default order (newest first) and its owners summary
-- read indexes instead of sorting and grouping the whole table.
CREATE INDEX jobs_created_id ON jobs (created, id);
--bun:split
CREATE INDEX jobs_owner ON jobs (owner_type, owner_id, owner_name);
