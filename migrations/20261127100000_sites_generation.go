package migrations

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// sitesGenerationTables are what a site's rendering reads: the site's
// row, its links to spaces and the names of those spaces. Any change to
// them moves auth_generation.sites, which the authentication middleware
// reads with the auth generation in one statement, so the sites list can
// keep what it rendered for as long as the number stays the same
// (api/hub listSites), whichever process made the change. Both numbers
// share a row, so a change of sites waits for a change of users, groups,
// permissions or keys being committed (and the reverse): no transaction
// of the hub changes both kinds, so no two can wait for each other.
var sitesGenerationTables = []struct{ table, update string }{
	{"sites", "UPDATE"},
	{"space_sites", "UPDATE"},
	{"spaces", "UPDATE OF name"},
}

func registerSitesGeneration(ms *migrate.Migrations) {
	ms.MustRegister(sitesGenerationUp, sitesGenerationDown)
}

func sitesGenerationUp(ctx context.Context, db *bun.DB) error {
	const bump = `UPDATE auth_generation SET sites = sites + 1 WHERE id = 1`
	stmts := []string{`ALTER TABLE auth_generation ADD COLUMN sites BIGINT NOT NULL DEFAULT 1`}
	pg := db.Dialect().Name() == dialect.PG
	for _, t := range sitesGenerationTables {
		for _, event := range []string{"INSERT", t.update, "DELETE"} {
			op, _, _ := strings.Cut(event, " ") // "UPDATE OF name": update
			name := fmt.Sprintf("%s_sites_generation_%s", t.table, strings.ToLower(op))
			if pg {
				stmts = append(stmts, pgTrigger(name, event+" ON "+t.table+" FOR EACH STATEMENT", bump)...)
			} else {
				stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s BEGIN %s; END`, name, event, t.table, bump))
			}
		}
	}
	return exec(ctx, db, stmts)
}

func sitesGenerationDown(ctx context.Context, db *bun.DB) error {
	var stmts []string
	for _, t := range sitesGenerationTables {
		stmts = append(stmts, dropTriggers(db, t.table, t.table+"_sites_generation", "insert", "update", "delete")...)
	}
	return exec(ctx, db, append(stmts, `ALTER TABLE auth_generation DROP COLUMN sites`))
}
