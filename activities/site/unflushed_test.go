package site

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// countingGets is a filesystem target that counts the reads of each key.
type countingGets struct {
	*targets.Filesystem
	mu   sync.Mutex
	gets map[string]int
}

func (c *countingGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.Filesystem.Get(ctx, key)
}

// skipWithoutChecksums skips a test about trusted checksums where a
// filesystem target in dir keeps none (no user xattrs: every copy is
// read back there).
func skipWithoutChecksums(t *testing.T, dir string) {
	t.Helper()
	fs, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, fs.Put(ctx, "probe", strings.NewReader("p"), 1))
	obj, err := fs.Stat(ctx, "probe")
	require.NoError(t, err)
	require.NoError(t, fs.Delete(ctx, "probe"))
	if obj.Checksum == "" {
		t.Skip("no checksum attributes on this filesystem: every copy is read back")
	}
}

// TestMigrateReadsBackAnUnflushedCopy: a premigrated file's copy on a
// filesystem target holds other bytes than its checksum attribute names,
// with the size and mtime the attribute names. That is what a crash can
// leave of an object written after the target's last flush, on a
// filesystem that may write metadata before data (ext4 without a journal
// or with data=writeback); a hand edit of the target leaves the same. The
// migrate trusted the attribute, released the file, and the stub's only
// copy was wrong. Now an object changed since the target's last complete
// flush is read back before anything relies on it: the migrate uploads
// the content again, and the stub recalls byte-identical. A copy flushed
// and unchanged since is trusted without a read.
func TestMigrateReadsBackAnUnflushedCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	skipWithoutChecksums(t, tdir)
	files := map[string][]byte{"/bad.bin": []byte("the copy of this one is stale"), "/good.bin": []byte("this one's copy is whole")}
	var paths []string
	for p, data := range files {
		writeOld(t, filepath.Join(dir, p), data)
		paths = append(paths, p)
	}
	root := newRoot(t, dir, false)
	fs, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: tdir})
	require.NoError(t, err)
	target := &countingGets{Filesystem: fs, gets: map[string]int{}}
	res, err := Premigrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	// A later flush (the next batch's), stamped: more than a second after
	// the premigrate's.
	time.Sleep(1100 * time.Millisecond)
	require.NoError(t, fs.Sync(ctx))

	flipBit(t, filepath.Join(tdir, filepath.FromSlash(contentKey(sha(files["/bad.bin"])))))
	res, err = Migrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	require.Positive(t, target.gets[contentKey(sha(files["/bad.bin"]))], "the changed copy is read back")
	require.Zero(t, target.gets[contentKey(sha(files["/good.bin"]))], "the flushed copy is trusted")
	for p, data := range files {
		requireRecallsIntact(t, root, p, only("t", fs), data)
	}
}

// TestFlushChild puts an object on the filesystem target in
// HUB_FLUSH_CHILD_TARGET and flushes it, in a child process a fault point
// kills.
func TestFlushChild(t *testing.T) {
	tdir := os.Getenv("HUB_FLUSH_CHILD_TARGET")
	if tdir == "" {
		return
	}
	ctx := context.Background()
	fs, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: tdir})
	require.NoError(t, err)
	require.NoError(t, fs.Put(ctx, "objects/x", strings.NewReader("flushed or not"), 14))
	time.Sleep(30 * time.Millisecond) // past the stamp's tick: see Filesystem.stamp
	require.NoError(t, fs.Sync(ctx))
}

// TestKilledFlushTrustsNothing: a target flush killed before its flush
// began or before it was stamped leaves the objects written before it
// Unflushed for the next process (whose crash may have lost their bytes);
// one that ended leaves them trusted.
func TestKilledFlushTrustsNothing(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"target.flush-begun@1", "target.flushed@1", ""} {
		tdir := t.TempDir()
		skipWithoutChecksums(t, tdir)
		killed := runChild(t, "^TestFlushChild$", "HUB_FLUSH_CHILD_TARGET="+tdir, "HUB_FAULT_POINT="+point)
		require.Equal(t, point != "", killed, point)
		fs, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: tdir})
		require.NoError(t, err)
		obj, err := fs.Stat(context.Background(), "objects/x")
		require.NoError(t, err)
		require.NotEmpty(t, obj.Checksum)
		require.Equal(t, point != "", obj.Unflushed, "killed at %q", point)
	}
}
