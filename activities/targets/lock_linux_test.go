package targets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
)

// TestFilesystemLockSeesRecordLocks: an NFS server takes its clients'
// locks of a file as record locks, which an flock on the server host
// does not see; a collector there ran beside a client's. Here a record
// lock (as the server takes for a client, or a process of another tool)
// is held on the lock file: the lock is refused. Before, the flock alone
// was taken beside it.
func TestFilesystemLockSeesRecordLocks(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	other, err := os.OpenFile(filepath.Join(dir, lockPrefix+"collect"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, unix.FcntlFlock(other.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK}))
	_, _, err = d.TryLock(context.Background(), "collect")
	require.ErrorIs(t, err, ErrLocked)

	require.NoError(t, unix.FcntlFlock(other.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_UNLCK}))
	_, release, err := d.TryLock(context.Background(), "collect")
	require.NoError(t, err)
	release()
}

// TestNoCollectionWhereLocksAreTheHostsOnly: on NFS mounted nolock (or
// with local_lock=flock or all) flock succeeds on every host at once
// (nfs(5)), so two hosts' collectors of one target would both hold its
// lock (a reviewer's finding). Such a mount, told by its options in the
// mount table, is refused; one whose locks the server keeps is not.
func TestNoCollectionWhereLocksAreTheHostsOnly(t *testing.T) {
	dir := t.TempDir()
	id, _, ok := fsutil.MountIDOf(dir)
	if !ok {
		t.Skip("no mount IDs on this kernel")
	}
	real := networkFS
	t.Cleanup(func() { networkFS = real })
	networkFS = func(string) bool { return true }
	saved := fsutil.MountTables
	t.Cleanup(func() { fsutil.MountTables = saved })
	for opts, refused := range map[string]bool{
		"rw,vers=3,nolock,proto=tcp,local_lock=all": true,
		"rw,vers=4.2,local_lock=flock":              true,
		"rw,vers=4.2,local_lock=none":               false,
		"rw,vers=3,local_lock=posix":                false,
	} {
		info := filepath.Join(t.TempDir(), "mountinfo")
		line := fmt.Sprintf("%d 1 0:99 / / rw,relatime shared:1 - nfs server:/export %s\n", id, opts)
		require.NoError(t, os.WriteFile(info, []byte(line), 0o644))
		fsutil.MountTables.Mountinfo = info
		d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
		require.NoError(t, err)
		_, release, err := d.TryLock(context.Background(), "collect")
		if refused {
			require.ErrorContains(t, err, "hold on its own host only", opts)
			continue
		}
		require.NoError(t, err, opts)
		release()
	}
}

// TestVolumesBeneathATargetAreRememberedByAnyName: the site's memory of
// the volumes beneath a target was trimmed whole before its lines were
// split, so a name starting or ending with a space (or holding a newline)
// was remembered wrong and the target refused for ever from its second
// use on (a reviewer's scratch test). Names are quoted; unmounted, each
// such volume is told missing.
func TestVolumesBeneathATargetAreRememberedByAnyName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "target")
	seen := t.TempDir()
	for _, name := range []string{" objects", "refs ", "a\nb"} {
		vol := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(vol, 0o755))
		require.NoError(t, unix.Mount("tmpfs", vol, "tmpfs", 0, "size=1m"))
		t.Cleanup(func() { _ = unix.Unmount(vol, unix.MNT_DETACH) })
	}
	for range 2 {
		_, err := NewFilesystem(Config{MigrationTargetFolder: dir, Seen: seen})
		require.NoError(t, err)
	}
	require.NoError(t, unix.Unmount(filepath.Join(dir, "refs "), unix.MNT_DETACH))
	_, err := NewFilesystem(Config{MigrationTargetFolder: dir, Seen: seen})
	require.ErrorIs(t, err, ErrTargetNotMounted)
	require.ErrorContains(t, err, "refs ")
}
