package targets

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAVolumeGoneUnderTheDriverIsRefused: a filesystem target's path
// that leads to another filesystem than when the driver was made (its
// volume unmounted lazily under a running step, or another mounted over
// it; here a symlink to /dev/shm stands for the mount) takes no object
// and no marker group, so nothing is written where the volume, once
// back, would hide it. Once the path leads back, writes go on.
func TestAVolumeGoneUnderTheDriverIsRefused(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "target")
	other, err := os.MkdirTemp("/dev/shm", "hub-other-volume-")
	if err != nil {
		t.Skipf("no /dev/shm to stand for another volume: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(other) })
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	require.NoError(t, d.Put(ctx, "objects/aa/one", strings.NewReader("one"), 3))

	require.NoError(t, os.Rename(dir, filepath.Join(parent, "away")))
	require.NoError(t, os.Symlink(other, dir))
	err = d.Put(ctx, "objects/aa/two", strings.NewReader("two"), 3)
	require.ErrorIs(t, err, ErrTargetNotMounted)
	_, err = d.NewGroup(ctx)
	require.ErrorIs(t, err, ErrTargetNotMounted)
	require.NoError(t, filepath.WalkDir(other, func(p string, e fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.True(t, e.IsDir(), "nothing written on the other volume: %s", p)
		return nil
	}))

	require.NoError(t, os.Remove(dir))
	require.NoError(t, os.Rename(filepath.Join(parent, "away"), dir))
	require.NoError(t, d.Put(ctx, "objects/aa/two", strings.NewReader("two"), 3))
	g, err := d.NewGroup(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Close())
}
