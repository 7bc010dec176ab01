package migrations

import (
	"context"
	"fmt"
	"strings"

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
// (api/hub keptList). sqlite runs one writer at a time, so a row every
// writer of jobs and tasks updates makes none of them wait longer.
// PostgreSQL runs writers side by side, and such a row would make every
// job's progress wait for every other's: there the read takes the
// statement's snapshot instead (models.ReadGenerations), and this
// migration does nothing.
var jobsGenerationTables = []struct{ table, update string }{
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
	stmts := []string{`ALTER TABLE auth_generation ADD COLUMN jobs BIGINT NOT NULL DEFAULT 1`}
	for _, t := range jobsGenerationTables {
		for _, event := range []string{"INSERT", t.update, "DELETE"} {
			op, _, _ := strings.Cut(event, " ") // "UPDATE OF name, site_id": update
			stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s_jobs_generation_%s AFTER %s ON %s BEGIN
				UPDATE auth_generation SET jobs = jobs + 1 WHERE id = 1; END`, t.table, strings.ToLower(op), event, t.table))
		}
	}
	return exec(ctx, db, stmts)
}

func jobsGenerationDown(ctx context.Context, db *bun.DB) error {
	if db.Dialect().Name() == dialect.PG {
		return nil
	}
	var stmts []string
	for _, t := range jobsGenerationTables {
		stmts = append(stmts, dropTriggers(db, t.table, t.table+"_jobs_generation", "insert", "update", "delete")...)
	}
	return exec(ctx, db, append(stmts, `ALTER TABLE auth_generation DROP COLUMN jobs`))
}
