package models_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// TestAdminPasswordResetOnlyWhenItChanges: a start that sets the
// administrator's password (HUB_ADMIN_PASSWORD, applied at every start)
// changes nothing when it is the same, so the administrator's tokens stay
// good; a different one is set, and dates the change (tokens issued
// before are refused).
func TestAdminPasswordResetOnlyWhenItChanges(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		require.NoError(t, models.EnsureAuthData(ctx, db))
		_, err := models.EnsureAdmin(ctx, db, "root2", "first-password", true)
		require.NoError(t, err)
		u, err := models.GetUser(ctx, db, "root2")
		require.NoError(t, err)
		require.NotNil(t, u.PasswordChanged)
		first := *u.PasswordChanged

		_, err = models.EnsureAdmin(ctx, db, "root2", "first-password", true)
		require.NoError(t, err)
		u, err = models.GetUser(ctx, db, "root2")
		require.NoError(t, err)
		require.True(t, u.PasswordChanged.Equal(first), "the same password is not set again")

		_, err = models.EnsureAdmin(ctx, db, "root2", "second-password", true)
		require.NoError(t, err)
		u, err = models.GetUser(ctx, db, "root2")
		require.NoError(t, err)
		require.True(t, u.CheckPassword("second-password"))
		require.True(t, u.PasswordChanged.After(first))
	})
}
