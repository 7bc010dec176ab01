package site

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/faildisk"
)

// TestRecallOntoAFailingDisk: a recall writes a stub's data back to a
// disk that fails the writes, and another flush of that filesystem (a
// second worker's, a user's sync -f), right after the copy, hears of the
// error first: Linux then tells no descriptor opened afterwards. The
// recall's flush, through the root folder the site holds open since it
// was opened, fails, and the record and the reference stay (before, it
// opened the folder for the flush, heard nothing and dropped them while
// the disk held other bytes). The recall cuts the file back to its stub,
// so that once the disk takes writes again the retry writes the data
// again (without, it refused: the disk's bytes are not the data's first).
func TestRecallOntoAFailingDisk(t *testing.T) {
	ctx := context.Background()
	dir, root, target, data, full, room := stubOnFailingDisk(t)
	abs, paths := filepath.Join(dir, "f.bin"), []string{"/f.bin"}
	full()
	t.Cleanup(func() { recallWritten = nil })
	recallWritten = func(string) {
		require.Error(t, fsutil.SyncFS(dir), "another's flush, the first to hear of it")
	}
	res, err := Recall(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeFailed, paths)
	require.Equal(t, 1, countRefs(t, target), "the reference stays")
	rec, err := root.state.get(abs, "f.bin")
	require.NoError(t, err)
	require.Equal(t, Migrated, rec.State, "and so does the record")

	room()
	recallWritten = nil
	res, err = Recall(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	require.Equal(t, "recalled", res[0].Message, "the data written again")
	require.Equal(t, sumOf(string(data)), onDisk(t, abs), "the disk holds the data")
}

// TestRetriedRecallReadsTheDisk: a recall wrote a stub's data back and was
// killed or abandoned; its flush failed meanwhile, heard of by another
// flush, and the next flush succeeds. The retry, which takes a whole file
// under its mark for the data written, hashes what the disk holds (not
// cached pages: hashOnDisk) and keeps the record and the reference. ext4
// on this machine drops a page whose writeback failed itself, so this
// test also passes with the cache trusted; a filesystem keeping such
// pages would fail it.
func TestRetriedRecallReadsTheDisk(t *testing.T) {
	ctx := context.Background()
	dir, root, target, data, full, room := stubOnFailingDisk(t)
	abs, paths := filepath.Join(dir, "f.bin"), []string{"/f.bin"}

	// The attempt: its mark, then the data written whole.
	rec, err := root.state.get(abs, "f.bin")
	require.NoError(t, err)
	rec.Pending = pendingRecall
	require.NoError(t, root.state.set(abs, "f.bin", *rec))
	full()
	f, err := os.OpenFile(abs, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Error(t, fsutil.SyncFS(dir), "the disk fails the data")
	room()

	res, err := Recall(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	require.NotEqual(t, onDisk(t, abs), sumOf(string(data)))
	requireAll(t, res, CodeFailed, paths)
	require.Equal(t, 1, countRefs(t, target), "the reference stays")
	rec, err = root.state.get(abs, "f.bin")
	require.NoError(t, err)
	require.Equal(t, Migrated, rec.State, "and so does the record")
}

// stubOnFailingDisk makes a site on a failing disk (faildisk.New) with
// /f.bin, 8 MiB, migrated to a target.
func stubOnFailingDisk(t *testing.T) (dir string, root *Root, target targets.Driver, data []byte, full, room func()) {
	t.Helper()
	dir, full, room = faildisk.New(t)
	target = fsTarget(t)
	root = newRoot(t, dir, false)
	data = make([]byte, 8<<20)
	_, _ = rand.Read(data)
	writeOld(t, filepath.Join(dir, "f.bin"), data)
	res, err := Migrate(context.Background(), root, []string{"/f.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	// The blocks the release freed were written once, and a write there
	// would reach the "disk": another file takes them.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cover.bin"), make([]byte, 16<<20), 0o644))
	require.NoError(t, fsutil.SyncFS(dir))
	return dir, root, target, data, full, room
}

// onDisk is the SHA-256 of the file as the disk holds it.
func onDisk(t *testing.T, abs string) string {
	t.Helper()
	f, err := os.Open(abs)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	return sumOf(string(got))
}
