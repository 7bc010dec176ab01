package migrations

import "github.com/uptrace/bun/migrate"

// job_stats.version moves on every update of a job stat's row (a path's
// outcome recorded again), as jobs.version does, so that the job stats
// list can keep what it rendered of a row and read a page's ids and
// versions instead of its rows. A new outcome is an insert: the trigger
// costs nothing on a job's first pass.
func registerJobStatVersions(ms *migrate.Migrations) {
	ms.MustRegister(versioned("job_stats", nil))
}
