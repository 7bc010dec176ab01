DROP INDEX IF EXISTS tasks_created_id;
