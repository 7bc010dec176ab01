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
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, append([]string{`CREATE TABLE row_counts (name VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL)`},
			countRowsUp(db, "jobs")...))
	}, func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, append(countRowsDown(db, "jobs"), `DROP TABLE IF EXISTS row_counts`))
	})
}

// countRowsUp starts keeping table's number of rows in row_counts.
func countRowsUp(db *bun.DB, table string) []string {
	stmts := []string{`INSERT INTO row_counts (name, n) SELECT '` + table + `', COUNT(*) FROM ` + table}
	if db.Dialect().Name() == dialect.PG {
		// Statement triggers with transition tables: one update per
		// statement, however many rows it inserts or deletes.
		for _, t := range []struct{ name, event, moved string }{
			{table + "_count_insert", "INSERT ON " + table + " REFERENCING NEW TABLE AS changed", "n + (SELECT COUNT(*) FROM changed)"},
			{table + "_count_delete", "DELETE ON " + table + " REFERENCING OLD TABLE AS changed", "n - (SELECT COUNT(*) FROM changed)"},
			{table + "_count_truncate", "TRUNCATE ON " + table, "0"},
		} {
			stmts = append(stmts, pgTrigger(t.name, t.event+" FOR EACH STATEMENT", `UPDATE row_counts SET n = `+t.moved+` WHERE name = '`+table+`'`)...)
		}
		return stmts
	}
	return append(stmts,
		`CREATE TRIGGER `+table+`_count_insert AFTER INSERT ON `+table+` BEGIN UPDATE row_counts SET n = n + 1 WHERE name = '`+table+`'; END`,
		`CREATE TRIGGER `+table+`_count_delete AFTER DELETE ON `+table+` BEGIN UPDATE row_counts SET n = n - 1 WHERE name = '`+table+`'; END`)
}

// countRowsDown stops keeping table's number of rows.
func countRowsDown(db *bun.DB, table string) []string {
	return append([]string{`DELETE FROM row_counts WHERE name = '` + table + `'`},
		dropTriggers(db, table, table+"_count", "insert", "delete", "truncate")...)
}
