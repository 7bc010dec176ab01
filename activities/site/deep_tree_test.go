//go:build linux

package site

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// deepName is a folder name of 250 bytes: 20 of them nested go past
// PATH_MAX (4096).
var deepName = strings.Repeat("d", 250)

// makeDeepTree nests levels folders named deepName in dir/top, made one
// level at a time relative to the folder above (no path the kernel would
// refuse), puts file "deep.txt" holding data in the deepest one, and
// returns the deepest folder's path relative to dir.
func makeDeepTree(t *testing.T, dir, top string, levels int, data []byte) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, top), 0o755))
	fd, err := unix.Open(filepath.Join(dir, top), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	rel := top
	for range levels {
		require.NoError(t, unix.Mkdirat(fd, deepName, 0o755))
		nfd, err := unix.Openat(fd, deepName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		unix.Close(fd)
		fd = nfd
		rel += "/" + deepName
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "deep.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	require.NoError(t, err)
	_, err = unix.Write(f, data)
	unix.Close(f)
	require.NoError(t, err)
	return rel
}

// readDeep reads the file rel (longer than PATH_MAX) below dir, one
// folder at a time.
func readDeep(t *testing.T, dir, rel string) ([]byte, error) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		nfd, err := unix.Openat(fd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd = nfd
	}
	defer unix.Close(fd)
	return os.ReadFile(fdName(fd) + "/" + parts[len(parts)-1])
}

// TestADeepTreeDoesNotBreakTheWalk: a user's tree nested deeper than
// PATH_MAX is walked like any other, and the rest of the root with it (a
// reviewer's finding: every folder was opened by its full path, the
// kernel refused the deep ones with "file name too long", and the walk of
// the whole root failed with no entries, for every user).
func TestADeepTreeDoesNotBreakTheWalk(t *testing.T) {
	for _, index := range []bool{false, true} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bob.txt"), []byte("bob"), 0o644))
		deep := makeDeepTree(t, dir, "alice", 20, []byte("deep"))
		require.Greater(t, len(deep), unix.PathMax)
		root := newRoot(t, dir, index)
		got := map[string]string{}
		err := Walk(context.Background(), root, []string{"/"}, WalkOptions{}, func(b []Entry) error {
			for _, e := range b {
				got[e.Path] = e.Type
			}
			return nil
		})
		require.NoError(t, err, "index=%v: a deep tree in /alice fails the walk of the whole root", index)
		require.Equal(t, TypeFile, got["/bob.txt"], "index=%v", index)
		require.Equal(t, TypeDirectory, got["/"+deep], "index=%v: the deepest folder", index)
		require.Equal(t, TypeFile, got["/"+deep+"/deep.txt"], "index=%v: the file in the deepest folder", index)
		require.Len(t, got, 1+1+20+1, "index=%v", index) // bob.txt, alice, its 20 folders, deep.txt
	}
}

// TestADeepFileGoesThroughTheSteps: a file deeper than PATH_MAX is
// premigrated, migrated, recalled and deleted through its pinned folder
// like any other, and a step over it and another file acts on each (a
// reviewer's finding: the walk could not reach such a file; the steps are
// checked for what they do with its path). With the state index, whose
// record file for it would be longer than PATH_MAX still, the deep file
// fails alone with the kernel's reason, and the other one goes through.
func TestADeepFileGoesThroughTheSteps(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("deep data "), 1000)
	for _, index := range []bool{false, true} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bob.txt"), []byte("bob"), 0o644))
		deep := makeDeepTree(t, dir, "alice", 20, data) + "/deep.txt"
		root := newRoot(t, dir, index)
		target := fsTarget(t)
		paths := []string{"/" + deep, "/bob.txt"}
		res, err := Premigrate(ctx, root, paths, target, "t", StepOptions{})
		require.NoError(t, err)
		require.Len(t, res, 2)
		require.Equal(t, CodeOK, res[1].Code, "index=%v: %s", index, res[1].Message)
		if index {
			require.NotEqual(t, CodeOK, res[0].Code, "index=%v", index)
			t.Logf("with the state index, the deep file: %s %q", res[0].Code, res[0].Message)
			require.Contains(t, res[0].Message, "file name too long", "index=%v", index)
			got, err := readDeep(t, dir, deep)
			require.NoError(t, err)
			require.Equal(t, data, got, "index=%v: a failed migration left the data", index)
			continue
		}
		require.Equal(t, CodeOK, res[0].Code, "index=%v: %s", index, res[0].Message)
		res, err = Migrate(ctx, root, paths[:1], target, "t", StepOptions{})
		require.NoError(t, err)
		require.Equal(t, CodeOK, res[0].Code, res[0].Message)
		st, _, err := root.Stat("/" + deep)
		require.NoError(t, err)
		require.Equal(t, Migrated, st.State)
		res, err = Recall(ctx, root, paths[:1], only("t", target), StepOptions{})
		require.NoError(t, err)
		require.Equal(t, CodeOK, res[0].Code, res[0].Message)
		got, err := readDeep(t, dir, deep)
		require.NoError(t, err)
		require.Equal(t, data, got)
		res, err = Delete(ctx, root, paths[:1], only("t", target), StepOptions{})
		require.NoError(t, err)
		require.Equal(t, CodeOK, res[0].Code, res[0].Message)
		_, err = readDeep(t, dir, deep)
		require.True(t, errors.Is(err, os.ErrNotExist), "the deep file is deleted: %v", err)
		got, err = os.ReadFile(filepath.Join(dir, "bob.txt"))
		require.NoError(t, err)
		require.Equal(t, []byte("bob"), got, "the other file")
	}
}

// TestALongPathStaysBeneathTheRoot: a path longer than PATH_MAX, opened a
// chunk at a time, is refused as one opened in one call would be: a
// symlink on the way (in the first chunk, or in a later one) is not
// followed, and a folder found outside the root once the chunks are
// opened (moved out between two of them) fails the open (a reviewer's
// finding led to the chunked open).
func TestALongPathStaysBeneathTheRoot(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	deep := makeDeepTree(t, dir, "alice", 20, []byte("deep"))
	root := newRoot(t, dir, false)
	f, err := openBeneath(root.f, deep+"/deep.txt", os.O_RDONLY, 0)
	require.NoError(t, err)
	f.Close()
	// a symlink early (first chunk) and one late (last chunk)
	parts := strings.Split(deep, "/")
	for _, at := range []int{2, 19} {
		linkDir := strings.Join(parts[:at], "/")
		name := parts[at]
		d, err := openBeneath(root.f, linkDir, oDirPath, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Renameat(fdOf(d), name, fdOf(d), "moved"))
		require.NoError(t, unix.Symlinkat("moved", fdOf(d), name))
		_, err = openBeneath(root.f, deep+"/deep.txt", os.O_RDONLY, 0)
		require.ErrorIs(t, err, ErrSymlink, "a symlink at level %d", at)
		require.Contains(t, err.Error(), "deep.txt", "the refusal names the whole path")
		require.NoError(t, unix.Unlinkat(fdOf(d), name, 0))
		require.NoError(t, unix.Renameat(fdOf(d), "moved", fdOf(d), name))
		d.Close()
	}
	// the check that the folder the last chunk was opened in is beneath
	// the root: one outside is refused, one beneath it passes
	out, err := os.Open(outside)
	require.NoError(t, err)
	defer out.Close()
	require.ErrorIs(t, stillBeneath(root.f, out, strings.Count(outside, "/")-1), ErrOutsideRoot)
	sub, err := openBeneath(root.f, strings.Join(parts[:12], "/"), oDirPath, 0)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, stillBeneath(root.f, sub, 12))
	require.ErrorIs(t, stillBeneath(root.f, sub, 11), ErrOutsideRoot)
}
