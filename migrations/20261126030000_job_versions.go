package migrations

import (
	"context"
	"slices"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// jobs.version moves on every update of a job's row (a trigger, so no
// writer can forget it; job ids are never reused), so that the jobs list
// can keep what it rendered of a job and read again only the jobs that
// changed (models.RowKey).
func registerJobVersions(ms *migrate.Migrations) {
	ms.MustRegister(versioned("jobs", nil))
}

// versioned is a migration adding a version column to table, moved by a
// trigger on every update of a row, and then running more (and its
// rollback, less, before the column goes).
func versioned(table string, more []string, less ...string) (up, down migrate.MigrationFunc) {
	up = func(ctx context.Context, db *bun.DB) error {
		stmts := []string{`ALTER TABLE ` + table + ` ADD COLUMN version BIGINT NOT NULL DEFAULT 0`}
		if db.Dialect().Name() == dialect.PG {
			stmts = append(stmts, `CREATE FUNCTION `+table+`_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.version := OLD.version + 1;
	RETURN NEW;
END $$`, `CREATE TRIGGER `+table+`_version BEFORE UPDATE ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+table+`_version()`)
		} else {
			// The trigger's own update fires no trigger (sqlite runs
			// triggers recursively only with PRAGMA recursive_triggers).
			stmts = append(stmts, `CREATE TRIGGER `+table+`_version AFTER UPDATE ON `+table+` BEGIN
	UPDATE `+table+` SET version = OLD.version + 1 WHERE id = NEW.id;
END`)
		}
		return exec(ctx, db, append(stmts, more...))
	}
	down = func(ctx context.Context, db *bun.DB) error {
		stmts := slices.Clone(less)
		if db.Dialect().Name() == dialect.PG {
			stmts = append(stmts, `DROP TRIGGER IF EXISTS `+table+`_version ON `+table, `DROP FUNCTION IF EXISTS `+table+`_version()`)
		} else {
			stmts = append(stmts, `DROP TRIGGER IF EXISTS `+table+`_version`)
		}
		return exec(ctx, db, append(stmts, `ALTER TABLE `+table+` DROP COLUMN version`))
	}
	return up, down
}
