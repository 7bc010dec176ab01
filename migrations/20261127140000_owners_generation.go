package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// The jobs list names the owners of the jobs it lists (all of them, not
// only the page's), a query that reads an index of the owners. Their
// set changes only when a job is inserted or deleted or its owner
// columns are written, not when a running job makes progress: any of
// those moves job_owners_generation.n, which the authentication
// middleware reads with the other generations in one statement, so the
// owners of the unfiltered list are kept while it stays the same (api/hub
// listJobs), whichever process wrote the jobs.
//
// A table of its own, not a column of auth_generation: on PostgreSQL its
// row is taken by writers of jobs, and they take the jobs' count row
// first (as every trigger on jobs there does: 20261127000000), so the two
// are always taken in one order, and no writer of users or sites waits
// for them.
func registerOwnersGeneration(ms *migrate.Migrations) {
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		stmts := []string{
			`CREATE TABLE job_owners_generation (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)`,
			`INSERT INTO job_owners_generation (id, n) VALUES (1, 1)`,
		}
		bump := `UPDATE job_owners_generation SET n = n + 1 WHERE id = 1`
		for _, t := range []struct{ op, event, when string }{
			{"insert", "INSERT", ""},
			{"update", "UPDATE OF owner_type, owner_id, owner_name",
				"WHEN OLD.owner_type IS NOT NEW.owner_type OR OLD.owner_id IS NOT NEW.owner_id OR OLD.owner_name IS NOT NEW.owner_name"},
			{"delete", "DELETE", ""},
		} {
			name := "jobs_owners_generation_" + t.op
			if db.Dialect().Name() == dialect.PG {
				stmts = append(stmts, pgTrigger(name, t.event+" ON jobs FOR EACH STATEMENT",
					`PERFORM 1 FROM row_counts WHERE name = 'jobs' FOR UPDATE;
	`+bump)...)
			} else {
				stmts = append(stmts, `CREATE TRIGGER `+name+` AFTER `+t.event+` ON jobs `+t.when+` BEGIN `+bump+`; END`)
			}
		}
		return exec(ctx, db, stmts)
	}, func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, append(dropTriggers(db, "jobs", "jobs_owners_generation", "insert", "update", "delete"),
			`DROP TABLE job_owners_generation`))
	})
}
