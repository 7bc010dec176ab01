package targets

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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
