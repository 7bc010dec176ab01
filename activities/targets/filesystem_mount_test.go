package targets

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/fsutil"
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

	// The same filesystem (a bind mount lazily unmounted leaves its empty
	// mountpoint on the disk it came from).
	require.NoError(t, os.Mkdir(dir, 0o755))
	err = d.Put(ctx, "objects/aa/two", strings.NewReader("two"), 3)
	require.ErrorIs(t, err, ErrTargetNotMounted)
	require.NoFileExists(t, filepath.Join(dir, "objects", "aa", "two"))
	require.NoError(t, os.RemoveAll(dir))

	require.NoError(t, os.Rename(filepath.Join(parent, "away"), dir))
	require.NoError(t, d.Put(ctx, "objects/aa/two", strings.NewReader("two"), 3))
	g, err := d.NewGroup(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Close())
}

// TestAReadOnlyOpenCreatesNoFolder: a target opened only to be read (a
// listing from the hub, a maintenance command) whose folder is missing
// (beneath a volume not mounted) is refused and not created, so a site's
// first use cannot take that folder later.
func TestAReadOnlyOpenCreatesNoFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt", "archive")
	_, err := Open(Config{StorageType: "filesystem", MigrationTargetFolder: dir, MustExist: true})
	require.ErrorIs(t, err, ErrTargetNotMounted)
	require.NoDirExists(t, filepath.Dir(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	_, err = Open(Config{StorageType: "filesystem", MigrationTargetFolder: dir, MustExist: true})
	require.NoError(t, err)
}

// TestAFirstUseBeneathAnUnmountedVolumeIsRefused: a site's first use of a
// folder beneath a mount point of /etc/fstab that is not mounted (an empty
// mountpoint looks like a new empty folder) is refused, and no marker is
// made there.
func TestAFirstUseBeneathAnUnmountedVolumeIsRefused(t *testing.T) {
	mnt := t.TempDir()
	dir := filepath.Join(mnt, "archive")
	require.NoError(t, os.Mkdir(dir, 0o755))
	fstab := filepath.Join(t.TempDir(), "fstab")
	require.NoError(t, os.WriteFile(fstab, []byte("nas:/archive "+mnt+" nfs defaults 0 0\n"), 0o644))
	saved := fsutil.MountTables
	t.Cleanup(func() { fsutil.MountTables = saved })
	fsutil.MountTables.Fstab = fstab
	seen := t.TempDir()
	_, err := NewFilesystem(Config{MigrationTargetFolder: dir, Seen: seen})
	require.ErrorIs(t, err, ErrTargetNotMounted)
	require.ErrorContains(t, err, "/etc/fstab mounts")
	require.NoFileExists(t, filepath.Join(dir, targetMarker))

	fsutil.MountTables = saved // mounted (as far as fstab says)
	_, err = NewFilesystem(Config{MigrationTargetFolder: dir, Seen: seen})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, targetMarker))
}
