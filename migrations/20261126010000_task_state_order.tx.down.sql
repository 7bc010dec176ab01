DROP INDEX tasks_state_created_id;
