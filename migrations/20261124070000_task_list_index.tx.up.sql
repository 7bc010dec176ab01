-- The tasks list in its default order (newest first) reads an index
-- instead of sorting every task.
CREATE INDEX tasks_created_id ON tasks (created, id);
