package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// The tasks list counts its rows from row_counts too (one row for every
// batch step of every job: a million-path job alone makes thousands).
func registerTaskCount(ms *migrate.Migrations) {
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, countRowsUp(db, "tasks"))
	}, func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, countRowsDown(db, "tasks"))
	})
}
