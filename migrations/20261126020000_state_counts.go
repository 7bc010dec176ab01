package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// row_counts keeps the number of jobs and of tasks in each state too
// (rows named "jobs:state:SUCCESS", "tasks:state:FAILURE", ...), so that
// a list filtered by one state counts it without reading its rows.
func registerStateCounts(ms *migrate.Migrations) {
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, append(countStatesUp(db, "jobs"), countStatesUp(db, "tasks")...))
	}, func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, append(countStatesDown(db, "jobs"), countStatesDown(db, "tasks")...))
	})
}

// countStatesUp starts keeping the number of table's rows in each state:
// an insert or delete moves its rows' states, an update that changes a
// row's state moves the old one and the new one. A state's row is made by
// its first row. The triggers are made before the rows are counted: on
// PostgreSQL making them waits for the table's writers and holds off new
// ones until the migration commits, so no row is missed or counted twice.
func countStatesUp(db *bun.DB, table string) []string {
	prefix := "'" + table + ":state:'"
	var stmts []string
	if db.Dialect().Name() == dialect.PG {
		// move adds counts (a select of state and n) to the states' rows,
		// after locking the table's own count ("tasks", which its insert
		// and delete triggers move too): the transactions that change a
		// table's states wait for one another there, and never hold one
		// state's row while waiting for another's. Locking the states'
		// rows alone deadlocked: the cancel of a job's STARTED and
		// PENDING tasks (one row event after the other) against a task
		// going from PENDING to STARTED.
		move := func(counts string) string {
			return `PERFORM 1 FROM row_counts WHERE name = '` + table + `' FOR UPDATE;
	INSERT INTO row_counts (name, n) SELECT ` + prefix + ` || state, n FROM (` + counts + `) AS d (state, n)
		ON CONFLICT (name) DO UPDATE SET n = row_counts.n + EXCLUDED.n`
		}
		for _, t := range []struct{ name, event, moved string }{
			{table + "_state_count_insert", "INSERT ON " + table + " REFERENCING NEW TABLE AS changed FOR EACH STATEMENT",
				move(`SELECT state, COUNT(*) FROM changed GROUP BY state`)},
			{table + "_state_count_delete", "DELETE ON " + table + " REFERENCING OLD TABLE AS changed FOR EACH STATEMENT",
				move(`SELECT state, -COUNT(*) FROM changed GROUP BY state`)},
			// A row trigger: transition tables cannot be limited to the
			// updates of one column, and most updates change no state.
			{table + "_state_count_update", "UPDATE OF state ON " + table + " FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)",
				move(`VALUES (OLD.state, -1), (NEW.state, 1)`)},
			{table + "_state_count_truncate", "TRUNCATE ON " + table + " FOR EACH STATEMENT",
				`UPDATE row_counts SET n = 0 WHERE name LIKE '` + table + `:state:%'`},
		} {
			stmts = append(stmts, pgTrigger(t.name, t.event, t.moved)...)
		}
	} else {
		add := `INSERT INTO row_counts (name, n) VALUES (` + prefix + ` || NEW.state, 1) ON CONFLICT (name) DO UPDATE SET n = n + 1;`
		sub := `UPDATE row_counts SET n = n - 1 WHERE name = ` + prefix + ` || OLD.state;`
		stmts = append(stmts,
			`CREATE TRIGGER `+table+`_state_count_insert AFTER INSERT ON `+table+` BEGIN `+add+` END`,
			`CREATE TRIGGER `+table+`_state_count_delete AFTER DELETE ON `+table+` BEGIN `+sub+` END`,
			`CREATE TRIGGER `+table+`_state_count_update AFTER UPDATE OF state ON `+table+` WHEN OLD.state IS NOT NEW.state BEGIN `+sub+` `+add+` END`)
	}
	return append(stmts, `INSERT INTO row_counts (name, n) SELECT `+prefix+` || state, COUNT(*) FROM `+table+` GROUP BY state`)
}

// countStatesDown stops keeping the number of table's rows in each state.
func countStatesDown(db *bun.DB, table string) []string {
	return append([]string{`DELETE FROM row_counts WHERE name LIKE '` + table + `:state:%'`},
		dropTriggers(db, table, table+"_state_count", "insert", "delete", "update", "truncate")...)
}
