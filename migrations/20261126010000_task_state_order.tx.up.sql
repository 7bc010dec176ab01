-- The tasks list filtered by one state reads the tasks of that state in
-- the list's order (newest first) instead of sorting all of them.
CREATE INDEX tasks_state_created_id ON tasks (state, created, id);
