package migrations

import (
	"context"

	"github.com/uptrace/bun"
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
var sitesGenerationTables = []generationTable{
	{"sites", "UPDATE"},
	{"space_sites", "UPDATE"},
	{"spaces", "UPDATE OF name"},
}

func registerSitesGeneration(ms *migrate.Migrations) {
	ms.MustRegister(sitesGenerationUp, sitesGenerationDown)
}

func sitesGenerationUp(ctx context.Context, db *bun.DB) error {
	return exec(ctx, db, append([]string{`ALTER TABLE auth_generation ADD COLUMN sites BIGINT NOT NULL DEFAULT 1`},
		generationTriggers(db, "sites", sitesGenerationTables)...))
}

func sitesGenerationDown(ctx context.Context, db *bun.DB) error {
	return exec(ctx, db, append(dropGenerationTriggers(db, "sites", sitesGenerationTables), `ALTER TABLE auth_generation DROP COLUMN sites`))
}
