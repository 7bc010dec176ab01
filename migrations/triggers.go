package migrations

import (
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
