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

// A space item's deletion and the creation of a snapshot of it, running
// at the same time in two transactions, must not both commit (a
// reviewer's finding: the space's folder went while its snapshot was
// still to be taken). Each takes the space item's row lock before its
// check (FindCJItemForUpdate, LockCJItem; on sqlite every transaction
// holds the write lock from its start). These tests hold one side's
// transaction open, past its check, while the other runs.

// spaceAndSnapshot creates space item name and returns it with a
// snapshot item of it, not yet stored.
func spaceAndSnapshot(t *testing.T, db *bun.DB, name string) (*models.CJItem, *models.CJItem) {
	t.Helper()
	sp := &models.CJItem{Site: "site1", Type: models.CJSpaces, Name: name, Data: map[string]any{"name": name}}
	require.NoError(t, models.CreateCJItem(context.Background(), db, sp))
	snap := &models.CJItem{Site: "site1", Type: models.CJSnapshots, Scope: name, Name: "snap",
		Data: map[string]any{"name": "snap", "space": name}}
	return sp, snap
}

// createSnapshotHeld runs a snapshot's creation that has checked its
// space (locked) and stored the snapshot, and holds its transaction open
// a while before it commits; started tells when it is past its check.
func createSnapshotHeld(ctx context.Context, db *bun.DB, space string, snap *models.CJItem, started chan<- struct{}) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := models.FindCJItemForUpdate(ctx, tx, "site1", models.CJSpaces, "", space); err != nil {
			return err
		}
		if err := models.CreateCJItem(ctx, tx, snap); err != nil {
			return err
		}
		close(started)
		time.Sleep(300 * time.Millisecond)
		return nil
	})
}

// TestSpaceDeletionWaitsForASnapshotCreatedMeanwhile checks that the hub
// API's deletion of a space (DropSpaceCJItem) and the C+J API's (lock,
// then list its users), started while a snapshot's creation holds the
// space's row, see that snapshot once it commits, and refuse.
func TestSpaceDeletionWaitsForASnapshotCreatedMeanwhile(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		deletions := map[string]func(ctx context.Context, tx bun.Tx, it *models.CJItem) error{
			"hub API": func(ctx context.Context, tx bun.Tx, it *models.CJItem) error {
				_, err := models.DropSpaceCJItem(ctx, tx, &models.Space{Mountpoint: "/spaces/" + it.Name}, "site1")
				return err
			},
			"C+J API": func(ctx context.Context, tx bun.Tx, it *models.CJItem) error {
				if err := models.LockCJItem(ctx, tx, it.ID); err != nil {
					return err
				}
				users, err := models.SpaceCJUsers(ctx, tx, "site1", it.Name)
				if err != nil || users != "" {
					return models.ErrInUse
				}
				return models.MarkCJItemDeleted(ctx, tx, it, it.Etag)
			},
		}
		i := 0
		for what, del := range deletions {
			i++
			name := []string{"", "a", "b"}[i]
			sp, snap := spaceAndSnapshot(t, db, name)
			started := make(chan struct{})
			created := make(chan error, 1)
			go func() { created <- createSnapshotHeld(ctx, db, name, snap, started) }()
			<-started
			err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return del(ctx, tx, sp) })
			require.NoError(t, <-created)
			require.ErrorIs(t, err, models.ErrInUse, "%s: the deletion must see the snapshot created meanwhile", what)
			_, err = models.GetCJItem(ctx, db, "site1", models.CJSpaces, sp.ID)
			require.NoError(t, err, "%s: the space stays", what)
		}
	})
}

// TestSnapshotCreationFindsASpaceDeletedMeanwhileGone checks that a
// snapshot's creation that looks its space up (FindCJItemForUpdate)
// while the space's deletion holds its row finds it gone once that
// deletion commits.
func TestSnapshotCreationFindsASpaceDeletedMeanwhileGone(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		sp, _ := spaceAndSnapshot(t, db, "c")
		started := make(chan struct{})
		deleted := make(chan error, 1)
		go func() {
			deleted <- db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if err := models.LockCJItem(ctx, tx, sp.ID); err != nil {
					return err
				}
				if err := models.MarkCJItemDeleted(ctx, tx, sp, sp.Etag); err != nil {
					return err
				}
				close(started)
				time.Sleep(300 * time.Millisecond)
				return nil
			})
		}()
		<-started
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := models.FindCJItemForUpdate(ctx, tx, "site1", models.CJSpaces, "", "c")
			return err
		})
		require.NoError(t, <-deleted)
		require.ErrorIs(t, err, models.ErrNotFound, "the space whose deletion committed meanwhile is gone")
	})
}
