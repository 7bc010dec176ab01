package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

func TestUsersGroupsPermissions(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		require.NoError(t, models.EnsureAuthData(ctx, db))
		require.NoError(t, models.EnsureAuthData(ctx, db), "idempotent")

		u := &models.User{Username: "alice", IsActive: true}
		require.NoError(t, u.SetPassword("s3cret!"))
		pg := "staff"
		u.NASPrimaryGroup = &pg
		require.NoError(t, models.CreateUser(ctx, db, u, []string{models.GroupUsers}, 100000))
		require.Equal(t, int64(100000), *u.NASUID)

		v := &models.User{Username: "bob", IsActive: true, NASPrimaryGroup: &pg}
		require.NoError(t, models.CreateUser(ctx, db, v, nil, 100000))
		require.Equal(t, int64(100001), *v.NASUID, "uids are assigned in sequence")

		dup := &models.User{Username: "alice"}
		require.ErrorIs(t, models.CreateUser(ctx, db, dup, nil, 0), models.ErrConflict)
		require.ErrorIs(t, models.CreateUser(ctx, db, &models.User{Username: "carol"}, []string{"nope"}, 0), models.ErrNotFound)

		got, err := models.GetUser(ctx, db, "alice")
		require.NoError(t, err)
		require.True(t, got.CheckPassword("s3cret!"))
		require.False(t, got.CheckPassword("wrong"))
		require.Len(t, got.Groups, 1)

		perms, err := models.PermissionSet(ctx, db, got)
		require.NoError(t, err)
		require.True(t, perms["view_site"])
		require.False(t, perms["add_user"])

		_, err = models.GetUser(ctx, db, "nobody")
		require.ErrorIs(t, err, models.ErrNotFound)
		require.ErrorIs(t, models.DeleteUser(ctx, db, "nobody"), models.ErrNotFound)
		require.NoError(t, models.DeleteUser(ctx, db, "bob"))
	})
}

func TestClientKeys(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		u := &models.User{Username: "alice", IsActive: true}
		require.NoError(t, models.CreateUser(ctx, db, u, nil, 0))
		k := &models.ClientKey{Name: "ci", UserID: u.ID}
		key, err := models.CreateClientKey(ctx, db, k)
		require.NoError(t, err)

		found, err := models.ClientKeyUser(ctx, db, key)
		require.NoError(t, err)
		require.Equal(t, "alice", found.User.Username)
		_, err = models.ClientKeyUser(ctx, db, key+"x")
		require.ErrorIs(t, err, models.ErrNotFound)

		require.NoError(t, models.DeleteClientKey(ctx, db, k.ID))
		_, err = models.ClientKeyUser(ctx, db, key)
		require.ErrorIs(t, err, models.ErrNotFound)
	})
}

func TestHeartbeatsAndConfiguration(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "site1")
		require.NoError(t, err)
		again, err := models.EnsureSite(ctx, db, "site1")
		require.NoError(t, err)
		require.Equal(t, site.ID, again.ID)

		at := time.Now().UTC().Truncate(time.Millisecond)
		for i := 0; i < 2; i++ {
			require.NoError(t, models.RecordHeartbeat(ctx, db, models.Heartbeat{Site: "site1", Node: "n1", Queue: "default", WorkerVersion: "v1", At: at}))
		}
		require.ErrorIs(t, models.RecordHeartbeat(ctx, db, models.Heartbeat{Site: "nosuch", Node: "n1", Queue: "default", At: at}), models.ErrNotFound)
		nodes, err := models.SiteNodes(ctx, db, site.ID)
		require.NoError(t, err)
		require.Len(t, nodes, 1)
		require.Len(t, nodes[0].Queues, 1)
		require.WithinDuration(t, at, *nodes[0].LastHeartbeat, time.Millisecond)

		c, err := models.GetConfiguration(ctx, db)
		require.NoError(t, err)
		require.Equal(t, int64(90), c.JobsTTL)
		c.JobsTTL = 30
		require.NoError(t, models.SaveConfiguration(ctx, db, c))
		require.NoError(t, models.SaveConfiguration(ctx, db, c))
		c2, err := models.GetConfiguration(ctx, db)
		require.NoError(t, err)
		require.Equal(t, int64(30), c2.JobsTTL)

		s1, err := models.EnsureSecret(ctx, db, "k", func() ([]byte, error) { return []byte("one"), nil })
		require.NoError(t, err)
		s2, err := models.EnsureSecret(ctx, db, "k", func() ([]byte, error) { return []byte("two"), nil })
		require.NoError(t, err)
		require.Equal(t, s1, s2)
	})
}
