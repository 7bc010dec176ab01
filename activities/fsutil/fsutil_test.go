package fsutil

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWriteFileReusesADeadWritersTemp(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "settings.json")
	leftover, err := os.OpenFile(TempName(name), os.O_CREATE|os.O_WRONLY, 0o600) // a killed writer's file
	require.NoError(t, err)
	require.NoError(t, setMarker(leftover))
	_, err = leftover.WriteString("half a fi")
	require.NoError(t, err)
	require.NoError(t, leftover.Close())
	require.NoError(t, WriteFile(name, []byte("{}\n"), 0o644))
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, "{}\n", string(got))
	fi, err := os.Stat(name)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
}

func TestOpenTempWaitsForTheWriterHoldingIt(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "obj")
	first, err := OpenTemp(context.Background(), dst)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = OpenTemp(ctx, dst)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second writer waits while the first holds the file")

	done := make(chan *os.File)
	go func() {
		f, err := OpenTemp(context.Background(), dst)
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	_, err = first.WriteString("first")
	require.NoError(t, err)
	require.NoError(t, os.Rename(first.Name(), dst))
	require.NoError(t, first.Close())
	second := <-done
	defer Discard(second)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "first", string(got), "the second writer got a new file, not the renamed one")
	fi, err := second.Stat()
	require.NoError(t, err)
	require.Zero(t, fi.Size())
}

// TestOpenTempLeavesOthersFilesAlone: what the hub did not write under a
// temporary name (a symlink planted to redirect the write, a hard link, a
// user's own file) is never truncated or written through: the write goes
// to a fresh file instead, and lands whole.
func TestOpenTempLeavesOthersFilesAlone(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	require.NoError(t, os.Symlink(victim, TempName(filepath.Join(dir, "a"))))
	require.NoError(t, os.Link(victim, TempName(filepath.Join(dir, "b"))))
	user := TempName(filepath.Join(dir, "c"))
	require.NoError(t, os.WriteFile(user, []byte("a user's own file"), 0o644))
	require.NoError(t, os.Mkdir(TempName(filepath.Join(dir, "d")), 0o755))

	for _, name := range []string{"a", "b", "c", "d"} {
		dst := filepath.Join(dir, name)
		require.NoError(t, WriteFile(dst, []byte("new "+name), 0o644))
		got, err := os.ReadFile(dst)
		require.NoError(t, err)
		require.Equal(t, "new "+name, string(got))
	}
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "precious", string(got))
	got, err = os.ReadFile(user)
	require.NoError(t, err)
	require.Equal(t, "a user's own file", string(got))
	marked, supported := hasMarkerAt(t, filepath.Join(dir, "a"))
	require.False(t, marked && supported, "stored files do not keep the marker")
}

// TestAReusedEmptyTempIsMarked: a writer killed between creating its
// temporary file and marking it left it empty and unmarked; the next
// write reuses it (empty: nothing to lose), and marks it, so that a kill
// of that write leaves a partial file the write after reuses. Before, it
// stayed unmarked: once written into, no later write could take it, and
// it stayed behind for good.
func TestAReusedEmptyTempIsMarked(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(TempName(dst), nil, 0o600)) // the kill at temp.created
	f, err := OpenTemp(context.Background(), dst)
	require.NoError(t, err)
	defer Discard(f)
	require.Equal(t, TempName(dst), f.Name(), "reused")
	marked, supported := Marked(f)
	if !supported {
		t.Skip("no user extended attributes here")
	}
	require.True(t, marked)
}

func hasMarkerAt(t *testing.T, name string) (marked, supported bool) {
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	return Marked(f)
}

// TestOpenTempWithoutLocks: on a filesystem that cannot lock files, two
// writers of one destination never share the temporary name, where each
// would truncate or overwrite the other's data: each gets a file of its
// own, and each commit puts whole data in place. Not parallel: it sets
// flock.
func TestOpenTempWithoutLocks(t *testing.T) {
	flock = func(int, int) error { return syscall.ENOLCK }
	defer func() { flock = syscall.Flock }()
	dst := filepath.Join(t.TempDir(), "object")
	a, err := OpenTemp(context.Background(), dst)
	require.NoError(t, err)
	b, err := OpenTemp(context.Background(), dst)
	require.NoError(t, err)
	fa, err := a.Stat()
	require.NoError(t, err)
	fb, err := b.Stat()
	require.NoError(t, err)
	require.False(t, os.SameFile(fa, fb), "the two writers share a file")
	_, err = os.Lstat(TempName(dst))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing at the shared name")

	data := []byte("the whole content")
	for _, f := range []*os.File{a, b} {
		_, err := f.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, Commit(a, dst))
	require.NoError(t, Commit(b, dst))
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, data, got)
}
