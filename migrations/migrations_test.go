package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/migrations"
	"github.com/thehub/hub/models/dbtest"
)

// TestDownAndUpAgain: every migration can be rolled back and applied
// again, on both databases (the up and down files, and the Go migration
// with its per-dialect triggers).
func TestDownAndUpAgain(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		m, err := migrations.NewMigrator(db)
		require.NoError(t, err)
		for {
			g, err := m.Rollback(ctx)
			require.NoError(t, err)
			if g.IsZero() {
				break
			}
		}
		ms, err := m.MigrationsWithStatus(ctx)
		require.NoError(t, err)
		require.Empty(t, ms.Applied(), "all rolled back")
		require.NoError(t, migrations.Up(ctx, db))
		ms, err = m.MigrationsWithStatus(ctx)
		require.NoError(t, err)
		require.Empty(t, ms.Unapplied())
	})
}
