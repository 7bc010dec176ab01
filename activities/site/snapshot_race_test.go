package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSnapshotSwapRace: taking and removing scheduled snapshots while the
// space's snapshots folder is swapped for a symlink to a folder outside
// the root never writes, removes or moves anything there.
func TestSnapshotSwapRace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false)}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "spaces", "lab"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spaces", "lab", "f"), []byte("data"), 0o644))
	snaps := filepath.Join(dir, cjSnapshotsDir, "lab")
	require.NoError(t, os.MkdirAll(snaps, 0o755))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The folder outside holds what a removal by name would reach.
	outside, before := outsideTree(t, ScheduledSnapshotName(at))

	ctx := context.Background()
	stop := swapForLink(snaps, outside)
	deadline := time.Now().Add(removalRaceFor)
	for i := 0; time.Now().Before(deadline); i++ {
		in := SpaceSnapshotInput{Space: "lab", Folder: "/spaces/lab", At: at.Add(time.Duration(i%3) * time.Hour), KeepFor: time.Minute}
		_, _ = a.TakeSpaceSnapshot(ctx, in)
		_, _ = a.snapshot(ctx, "", &CJSnapshot{Space: "lab", Name: ScheduledSnapshotName(at)}, true)
	}
	stop()
	require.Equal(t, before, treeOf(t, outside), "nothing outside the root written, removed or moved")
}
