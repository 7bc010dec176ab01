package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// walkStates walks the whole root as discovery does and returns each
// file's state.
func walkStates(t *testing.T, root *Root) map[string]State {
	t.Helper()
	got := map[string]State{}
	require.NoError(t, Walk(context.Background(), root, []string{"/"}, WalkOptions{Types: []string{TypeFile}}, func(b []Entry) error {
		for _, e := range b {
			got[e.Path] = e.State
		}
		return nil
	}))
	return got
}

func stampOf(t *testing.T, root *Root, folder string) (os.FileInfo, error) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(root.dir, filepath.FromSlash(folder)))
	require.NoError(t, err)
	name, ok := markName(fi)
	require.True(t, ok)
	return os.Lstat(filepath.Join(root.state.marks.dir, cleanFoldersDir, name))
}

// TestCleanStamps: a discovery walk stamps the folders where it found no
// record, and the next walk skips their files' attributes; a stamp counts
// only while the folder's entries are unchanged and it has no mark. A
// stub a user moves into a stamped folder is seen as migrated, and a
// folder the site writes a record in is marked first, so its stamp no
// longer counts.
func TestCleanStamps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, p := range []string{"a/stub.bin", "b/one.bin", "b/two.bin", "c/x.bin"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("content of "+p), 0o644))
	}
	target := fsTarget(t)
	root := newRoot(t, dir, false)
	root.state.marks.cleanMargin = 0
	res, err := Migrate(ctx, root, []string{"/a/stub.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a/stub.bin"})

	want := map[string]State{"/a/stub.bin": Migrated, "/b/one.bin": Resident, "/b/two.bin": Resident, "/c/x.bin": Resident}
	require.Equal(t, want, walkStates(t, root))
	_, err = stampOf(t, root, "a")
	require.True(t, os.IsNotExist(err), "a folder holding a record is never stamped")
	for _, f := range []string{"b", "c"} {
		_, err := stampOf(t, root, f)
		require.NoError(t, err, "folder %s found without records is stamped", f)
	}
	require.Equal(t, want, walkStates(t, root), "a walk over stamped folders")

	// A user moves the stub into stamped b: b's ctime moves, its stamp no
	// longer counts, and the stub is seen for what it is.
	require.NoError(t, os.Rename(filepath.Join(dir, "a/stub.bin"), filepath.Join(dir, "b/stub.bin")))
	want = map[string]State{"/b/stub.bin": Migrated, "/b/one.bin": Resident, "/b/two.bin": Resident, "/c/x.bin": Resident}
	require.Equal(t, want, walkStates(t, root))

	// The site migrates c's file: it marks c first, so c's stamp (still
	// matching c's ctime: a record changes no folder entry) stops counting.
	res, err = Migrate(ctx, root, []string{"/c/x.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/c/x.bin"})
	want["/c/x.bin"] = Migrated
	require.Equal(t, want, walkStates(t, root))
	fresh := newRoot(t, dir, false) // the mark on disk, not this process's memory
	require.Equal(t, want, walkStates(t, fresh))

	// What the stamp skips: were c's mark lost, a walk in a new process
	// would trust c's stamp and not read x.bin's attribute.
	fi, err := os.Stat(filepath.Join(dir, "c"))
	require.NoError(t, err)
	name, _ := markName(fi)
	require.NoError(t, os.Remove(filepath.Join(root.state.marks.dir, name)))
	unmarked := newRoot(t, dir, false)
	require.Equal(t, Resident, walkStates(t, unmarked)["/c/x.bin"])
}

// TestCleanStampsWaitForQuietFolders: a folder changed within the margin
// before a walk (here, just created) is not stamped, since a change right
// after the walk read it could keep the same ctime on a coarse clock; nor
// is one whose files the walk did not all read.
func TestCleanStampsWaitForQuietFolders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "new"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new", "f"), nil, 0o644))
	root := newRoot(t, dir, false)
	require.Equal(t, cleanMargin, root.state.marks.cleanMargin)
	walkStates(t, root)
	_, err := stampOf(t, root, "new")
	require.True(t, os.IsNotExist(err), "stamped a folder changed just now")

	root.state.marks.cleanMargin = 0
	require.NoError(t, Walk(context.Background(), root, []string{"/"}, WalkOptions{Exclude: []string{"**/f"}}, func([]Entry) error { return nil }))
	_, err = stampOf(t, root, "new")
	require.True(t, os.IsNotExist(err), "stamped a folder whose files were not all read")

	// A stamp whose time is not the folder's ctime (one torn by a crash
	// keeps its creation time) counts for nothing, and the next walk
	// rewrites it.
	walkStates(t, root)
	stamp, err := stampOf(t, root, "new")
	require.NoError(t, err)
	abs := filepath.Join(root.state.marks.dir, cleanFoldersDir, stamp.Name())
	require.NoError(t, os.Chtimes(abs, time.Now(), time.Now()))
	d, err := os.Open(filepath.Join(dir, "new"))
	require.NoError(t, err)
	defer d.Close()
	require.False(t, root.state.marks.cleanState(d, time.Now()).clean)
	walkStates(t, root)
	require.True(t, root.state.marks.cleanState(d, time.Now()).clean)
}
