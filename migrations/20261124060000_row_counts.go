package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// row_counts keeps the number of rows of the jobs table, moved by
// triggers on every insert and delete, so that the unfiltered jobs list
// counts its rows without reading a million of them.
func registerRowCounts(ms *migrate.Migrations) {
	ms.MustRegister(rowCountsUp, rowCountsDown)
}

func rowCountsUp(ctx context.Context, db *bun.DB) error {
	stmts := []string{
		`CREATE TABLE row_counts (name VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL)`,
		`INSERT INTO row_counts (name, n) SELECT 'jobs', COUNT(*) FROM jobs`,
	}
	if db.Dialect().Name() == dialect.PG {
		// Statement triggers with transition tables: one update per
		// statement, however many rows it inserts or deletes.
		for _, t := range []struct{ name, event, moved string }{
			{"jobs_count_insert", "INSERT ON jobs REFERENCING NEW TABLE AS changed", "n + (SELECT COUNT(*) FROM changed)"},
			{"jobs_count_delete", "DELETE ON jobs REFERENCING OLD TABLE AS changed", "n - (SELECT COUNT(*) FROM changed)"},
			{"jobs_count_truncate", "TRUNCATE ON jobs", "0"},
		} {
			stmts = append(stmts, `CREATE FUNCTION `+t.name+`() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE row_counts SET n = `+t.moved+` WHERE name = 'jobs';
	RETURN NULL;
END $$`, `CREATE TRIGGER `+t.name+` AFTER `+t.event+` FOR EACH STATEMENT EXECUTE FUNCTION `+t.name+`()`)
		}
	} else {
		stmts = append(stmts,
			`CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'jobs'; END`,
			`CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'jobs'; END`)
	}
	return exec(ctx, db, stmts)
}

func rowCountsDown(ctx context.Context, db *bun.DB) error {
	var stmts []string
	if db.Dialect().Name() == dialect.PG {
		stmts = []string{
			`DROP TRIGGER IF EXISTS jobs_count_insert ON jobs`, `DROP TRIGGER IF EXISTS jobs_count_delete ON jobs`,
			`DROP TRIGGER IF EXISTS jobs_count_truncate ON jobs`, `DROP FUNCTION IF EXISTS jobs_count_insert()`,
			`DROP FUNCTION IF EXISTS jobs_count_delete()`, `DROP FUNCTION IF EXISTS jobs_count_truncate()`,
		}
	} else {
		stmts = []string{`DROP TRIGGER IF EXISTS jobs_count_insert`, `DROP TRIGGER IF EXISTS jobs_count_delete`}
	}
	return exec(ctx, db, append(stmts, `DROP TABLE IF EXISTS row_counts`))
}
