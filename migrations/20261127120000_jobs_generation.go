package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// jobsGenerationTables are what the jobs and tasks lists read, besides
// sites (whose generation they read too): jobs (with the counts the
// database keeps of them), tasks, and the names and sites of queues (a
// filter by queue_id; not their heartbeats).
// On sqlite any change to them moves auth_generation.jobs, which the
// authentication middleware reads with the other generations, so those
// lists can keep whole pages for as long as the number stays the same
// (api/hub servePage). sqlite runs one writer at a time, so a row every
// writer of jobs and tasks updates makes none of them wait longer.
// PostgreSQL runs writers side by side, and such a row would make every
// job's progress wait for every other's: there the read takes the
// statement's snapshot instead (models.ReadGenerations), and this
// migration does nothing.
var jobsGenerationTables = []generationTable{
	{"jobs", "UPDATE"},
	{"tasks", "UPDATE"},
	{"queues", "UPDATE OF name, site_id"},
}

func registerJobsGeneration(ms *migrate.Migrations) {
	ms.MustRegister(jobsGenerationUp, jobsGenerationDown)
}

func jobsGenerationUp(ctx context.Context, db *bun.DB) error {
	if db.Dialect().Name() == dialect.PG {
		return nil
	}
	return exec(ctx, db, append([]string{`ALTER TABLE auth_generation ADD COLUMN jobs BIGINT NOT NULL DEFAULT 1`},
		generationTriggers(db, "jobs", jobsGenerationTables)...))
}

func jobsGenerationDown(ctx context.Context, db *bun.DB) error {
	if db.Dialect().Name() == dialect.PG {
		return nil
	}
	return exec(ctx, db, append(dropGenerationTriggers(db, "jobs", jobsGenerationTables), `ALTER TABLE auth_generation DROP COLUMN jobs`))
}
