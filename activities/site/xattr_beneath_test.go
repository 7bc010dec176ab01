package site

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestXattrReadsFollowTheFolder: the attributes the site trusts (state
// records, user metadata) are read through the descriptor of the folder
// that was opened beneath the root, never by a path that a rename can
// redirect. The file's folder is renamed away and a look-alike holding
// other attributes put in its place after the lookup: the reads still
// see the first file's attributes. This is the form the reads take when
// the kernel has no getxattrat(2) (before Linux 6.13) and in the scans.
func TestXattrReadsFollowTheFolder(t *testing.T) {
	dir := t.TempDir()
	r := newRoot(t, dir, false)
	if !r.state.xattr {
		t.Fatal("this test needs a filesystem with user extended attributes under " + dir)
	}
	put := func(folder, meta string) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, folder), 0o755))
		f := filepath.Join(dir, folder, "a.txt")
		require.NoError(t, os.WriteFile(f, []byte(meta), 0o644))
		require.NoError(t, unix.Lsetxattr(f, metaXattrPrefix+"owner", []byte(meta), 0))
	}
	put("data", "alice")
	l, err := r.locate("/data/a.txt")
	require.NoError(t, err)
	defer l.close()

	require.NoError(t, os.Rename(filepath.Join(dir, "data"), filepath.Join(dir, "moved")))
	put("data", "mallory")

	m, ok, err := readXattrMeta(l.path())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "alice", m.Fields["owner"], "read through the folder opened before the swap")
	rec, err := r.state.get(l.path(), l.rel)
	require.NoError(t, err)
	require.Nil(t, rec, "no record on either file")

	// A folder swapped for a symlink to outside the root is not followed.
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "a.txt"), nil, 0o644))
	require.NoError(t, unix.Lsetxattr(filepath.Join(outside, "a.txt"), metaXattrPrefix+"owner", []byte("outside"), 0))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "data")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "data")))
	m, _, err = readXattrMeta(l.path())
	require.NoError(t, err)
	require.Equal(t, "alice", m.Fields["owner"])
	_, err = r.locate("/data/a.txt")
	require.ErrorIs(t, err, ErrSymlink, "a new lookup refuses the symlink")
}
