package migrations

import (
	"fmt"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// pgTrigger is a PL/pgSQL function called name that runs body and
// returns NULL, and the trigger of that name running it AFTER event (the
// operation, the table and the level, as in "INSERT ON jobs REFERENCING
// NEW TABLE AS changed FOR EACH STATEMENT").
func pgTrigger(name, event, body string) []string {
	return []string{`CREATE FUNCTION ` + name + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	` + body + `;
	RETURN NULL;
END $$`, `CREATE TRIGGER ` + name + ` AFTER ` + event + ` EXECUTE FUNCTION ` + name + `()`}
}

// dropTriggers drops table's triggers prefix_op for each op, and on
// PostgreSQL their functions (sqlite has no truncate triggers).
func dropTriggers(db *bun.DB, table, prefix string, ops ...string) []string {
	var stmts []string
	for _, op := range ops {
		name := prefix + "_" + op
		if db.Dialect().Name() == dialect.PG {
			stmts = append(stmts, `DROP TRIGGER IF EXISTS `+name+` ON `+table, `DROP FUNCTION IF EXISTS `+name+`()`)
		} else if op != "truncate" {
			stmts = append(stmts, `DROP TRIGGER IF EXISTS `+name)
		}
	}
	return stmts
}

// generationTable is a table whose changes move a column of
// auth_generation; update is the event that counts as its update
// ("UPDATE", or "UPDATE OF name" for some columns only).
type generationTable struct{ table, update string }

// generationTriggers are the statements that make triggers adding one to
// auth_generation's column at every insert, update (as update says) or
// delete of each table, named table_column_generation_op: on PostgreSQL
// once a statement, on sqlite (which has no other kind) once a row.
func generationTriggers(db *bun.DB, column string, tables []generationTable) []string {
	bump := fmt.Sprintf(`UPDATE auth_generation SET %s = %s + 1 WHERE id = 1`, column, column)
	var stmts []string
	for _, t := range tables {
		for _, event := range []string{"INSERT", t.update, "DELETE"} {
			op, _, _ := strings.Cut(event, " ") // "UPDATE OF name": update
			name := fmt.Sprintf("%s_%s_generation_%s", t.table, column, strings.ToLower(op))
			if db.Dialect().Name() == dialect.PG {
				stmts = append(stmts, pgTrigger(name, event+" ON "+t.table+" FOR EACH STATEMENT", bump)...)
			} else {
				stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s BEGIN %s; END`, name, event, t.table, bump))
			}
		}
	}
	return stmts
}

// dropGenerationTriggers drops what generationTriggers made.
func dropGenerationTriggers(db *bun.DB, column string, tables []generationTable) []string {
	var stmts []string
	for _, t := range tables {
		stmts = append(stmts, dropTriggers(db, t.table, t.table+"_"+column+"_generation", "insert", "update", "delete")...)
	}
	return stmts
}
