package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// jobs.version moves on every update of a job's row (a trigger, so no
// writer can forget it; job ids are never reused), so that the jobs list
// can keep the rows it showed and read again only those that changed
// (models.JobKey).
func registerJobVersions(ms *migrate.Migrations) {
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		stmts := []string{`ALTER TABLE jobs ADD COLUMN version BIGINT NOT NULL DEFAULT 0`}
		if db.Dialect().Name() == dialect.PG {
			stmts = append(stmts, `CREATE FUNCTION jobs_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.version := OLD.version + 1;
	RETURN NEW;
END $$`, `CREATE TRIGGER jobs_version BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_version()`)
		} else {
			// The trigger's own update fires no trigger (sqlite runs
			// triggers recursively only with PRAGMA recursive_triggers).
			stmts = append(stmts, `CREATE TRIGGER jobs_version AFTER UPDATE ON jobs BEGIN
	UPDATE jobs SET version = OLD.version + 1 WHERE id = NEW.id;
END`)
		}
		return exec(ctx, db, stmts)
	}, func(ctx context.Context, db *bun.DB) error {
		stmts := []string{`DROP TRIGGER IF EXISTS jobs_version`}
		if db.Dialect().Name() == dialect.PG {
			stmts = []string{`DROP TRIGGER IF EXISTS jobs_version ON jobs`, `DROP FUNCTION IF EXISTS jobs_version()`}
		}
		return exec(ctx, db, append(stmts, `ALTER TABLE jobs DROP COLUMN version`))
	})
}
