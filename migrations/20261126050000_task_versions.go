package migrations

import "github.com/uptrace/bun/migrate"

// tasks.version moves on every update of a task's row, as jobs.version
// does, and the indexes of the tasks list's orders hold it, so that the
// list reads a page's ids and versions from the index alone and renders
// again only the tasks that changed.
func registerTaskVersions(ms *migrate.Migrations) {
	ms.MustRegister(versioned("tasks", []string{
		`DROP INDEX tasks_created_id`,
		`CREATE INDEX tasks_created_id ON tasks (created, id, version)`,
		`DROP INDEX tasks_state_created_id`,
		`CREATE INDEX tasks_state_created_id ON tasks (state, created, id, version)`,
	},
		`DROP INDEX tasks_state_created_id`,
		`CREATE INDEX tasks_state_created_id ON tasks (state, created, id)`,
		`DROP INDEX tasks_created_id`,
		`CREATE INDEX tasks_created_id ON tasks (created, id)`,
	))
}
