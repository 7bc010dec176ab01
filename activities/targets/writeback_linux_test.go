package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/internal/faildisk"
)

// TestFlushLearnsOfAWritebackErrorAnotherFlushSawFirst: an object's bytes
// fail to reach the disk, and another flush of that filesystem (another
// process's, a site's on the same disk) is the first to hear of it: Linux
// then tells no descriptor opened afterwards. The driver's flush, through
// the folder it holds open since it was made, fails too (before, it opened
// the folder for each flush, succeeded and stamped a time after the object:
// its checksum was trusted, the bytes on disk were not it). And the object
// stays distrusted after later flushes succeed, also to a driver made
// afterwards, until it is written again.
func TestFlushLearnsOfAWritebackErrorAnotherFlushSawFirst(t *testing.T) {
	ctx := context.Background()
	dir, full, room := faildisk.New(t)
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	putFlushed(t, d, "a", "flushed before the disk failed")
	time.Sleep(stampEvery)

	full()
	lost := make([]byte, 8<<20)
	_, _ = rand.Read(lost)
	require.NoError(t, d.Put(ctx, "b", bytes.NewReader(lost), int64(len(lost))))
	require.Error(t, fsutil.SyncFS(dir), "the disk refuses the bytes: another flush hears of it first")
	require.NoError(t, fsutil.SyncFS(dir), "and no descriptor opened since hears of it again")
	require.Error(t, d.Sync(ctx), "the driver's flush hears of it")
	require.True(t, unflushedObject(t, d, "b"))

	// What was written while the disk failed (the window on the stamp
	// among it) may fail the first flushes after: they are retried.
	room()
	for i := 0; d.Sync(ctx) != nil; i++ {
		require.Less(t, i, 3, "the disk takes writes again")
	}
	time.Sleep(stampEvery)
	require.NoError(t, d.Sync(ctx))
	require.True(t, unflushedObject(t, d, "b"), "changed before a flush failed")
	require.False(t, unflushedObject(t, d, "a"))
	restarted, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	require.True(t, unflushedObject(t, restarted, "b"))

	time.Sleep(stampEvery)
	require.NoError(t, d.Put(ctx, "b", bytes.NewReader(lost), int64(len(lost))))
	putFlushed(t, d, "c", "written after")
	require.False(t, unflushedObject(t, d, "b"), "written again, and flushed")
}

// TestFlushReachesFilesystemsMountedInside: syncfs flushes one
// filesystem, and the stamp speaks for every object under the target
// folder, so a flush reaches every filesystem mounted beneath it: those
// mounted when the driver was made (also by a driver that wrote nothing
// there: another process's objects are stamped by it too), and one
// mounted since, once an object is written on it. Before, only the
// target folder's own was flushed, and objects on the others were
// trusted unread after a flush that never wrote them.
func TestFlushReachesFilesystemsMountedInside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	ctx := context.Background()
	dir := t.TempDir()
	mount := func(name string) uint64 {
		p := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(p, 0o755))
		require.NoError(t, unix.Mount("tmpfs", p, "tmpfs", 0, "size=16m"))
		t.Cleanup(func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
		var st unix.Stat_t
		require.NoError(t, unix.Stat(p, &st))
		return st.Dev
	}
	var st unix.Stat_t
	require.NoError(t, unix.Stat(dir, &st))
	own, early := st.Dev, mount("objects")
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	late := mount("refs")

	flushed := map[uint64]bool{}
	real := syncFS
	t.Cleanup(func() { syncFS = real })
	syncFS = func(f *os.File) error {
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(int(f.Fd()), &st))
		flushed[st.Dev] = true
		return real(f)
	}
	require.NoError(t, d.Put(ctx, "objects/ab/x", strings.NewReader("x"), 1))
	require.NoError(t, d.Create(ctx, "refs/ab/y", []byte("a marker")))
	require.NoError(t, d.Sync(ctx))
	require.Equal(t, map[uint64]bool{own: true, early: true, late: true}, flushed)

	clear(flushed)
	other, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	require.NoError(t, other.Sync(ctx))
	require.Equal(t, map[uint64]bool{own: true, early: true, late: true}, flushed, "a driver that wrote nothing there")
}
