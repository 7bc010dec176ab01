package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSpaceSnapshotRetentionAndLock: a scheduled snapshot is a copy named
// after its time; retention removes only expired scheduled snapshots; a
// pool at or above the lock threshold takes none.
func TestSpaceSnapshotRetentionAndLock(t *testing.T) {
	dir := t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false)}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "spaces", "lab"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spaces", "lab", "f"), []byte("data"), 0o644))
	snaps := filepath.Join(dir, ".snapshots", "lab")
	now := time.Date(2026, 11, 23, 2, 30, 0, 0, time.UTC)
	for _, n := range []string{ScheduledSnapshotName(now.Add(-8 * 24 * time.Hour)), ScheduledSnapshotName(now.Add(-6 * 24 * time.Hour)), "manual"} {
		require.NoError(t, os.MkdirAll(filepath.Join(snaps, n), 0o755))
	}
	in := SpaceSnapshotInput{Space: "lab", Folder: "/spaces/lab", At: now, KeepFor: 7 * 24 * time.Hour}
	res, err := a.TakeSpaceSnapshot(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "scheduled-20261123T023000Z", res.Taken)
	require.Equal(t, []string{"scheduled-20261115T023000Z"}, res.Removed)
	b, err := os.ReadFile(filepath.Join(snaps, res.Taken, "f"))
	require.NoError(t, err)
	require.Equal(t, "data", string(b))

	// Run again (a retried activity): the same snapshot, nothing more.
	res, err = a.TakeSpaceSnapshot(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "scheduled-20261123T023000Z", res.Taken)
	require.Empty(t, res.Removed)

	// The pool is 90% full: a lock threshold of 85% takes no snapshot.
	a.Utilisation = func(context.Context, string) (int64, int64, error) { return 90, 100, nil }
	in.At, in.LockThreshold = now.Add(24*time.Hour), 85
	res, err = a.TakeSpaceSnapshot(context.Background(), in)
	require.NoError(t, err)
	require.Empty(t, res.Taken)
	require.Contains(t, res.Skipped, "lock_threshold")
	_, err = os.Stat(filepath.Join(snaps, ScheduledSnapshotName(in.At)))
	require.True(t, os.IsNotExist(err))
	des, err := os.ReadDir(snaps)
	require.NoError(t, err)
	require.Len(t, des, 3, "manual, and the two scheduled ones within a week")
}
