package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoScansKeepMetadata plays two scans of one site on two nodes (two
// handles on the same file index) of a root without user xattrs, where
// the metadata of files lives in the index only. Scan A began first (the
// lower id) and is still walking when scan B walks /p and sweeps; meanwhile
// A's walk reaches /p after B's, and a user creates files and moves one
// away and back. B's sweep, then A's, must keep every row whose file is
// there, with its metadata, and still drop the row of a deleted file.
func TestTwoScansKeepMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, away := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{"/p/a.txt": "a", "/p/c.txt": "c", "/p/gone.txt": "g", "/q/z.txt": "z"})
	rootB, rootA := newRoot(t, dir, true), newRoot(t, dir, true)
	require.False(t, rootB.state.xattr, "the metadata must live in the index only")
	xB, err := rootB.Files()
	require.NoError(t, err)
	xA, err := OpenFileIndex(rootA, filepath.Join(dir, hubDir, fileIndexName))
	require.NoError(t, err)
	t.Cleanup(func() { _ = xA.Close() })
	nodeB, nodeA := &Activities{Root: rootB, Site: "s"}, &Activities{Root: rootA, Site: "s"}
	v := "apollo"
	project := MetaChange{Set: map[string]*string{"project": &v}}

	_, err = xB.Scan(ctx, nil, nil)
	require.NoError(t, err)
	for _, p := range []string{"/p/a.txt", "/p/c.txt", "/p/gone.txt"} {
		_, err = nodeB.setMeta(ctx, xB, p, project)
		require.NoError(t, err)
	}

	// Node A begins a full scan (as scan does), then walks elsewhere.
	res, err := xA.db.ExecContext(ctx, `INSERT INTO scans (started) VALUES (?)`, time.Now().UnixNano())
	require.NoError(t, err)
	idA, err := res.LastInsertId()
	require.NoError(t, err)
	seenByA := func(p string) {
		t.Helper()
		row, ok, err := xA.describeRow(p)
		require.NoError(t, err)
		require.True(t, ok, p)
		require.NoError(t, xA.put(ctx, idA, []IndexedFile{row}, true))
	}

	// The user deletes a file and moves another away while B walks.
	require.NoError(t, os.Remove(filepath.Join(dir, "p/gone.txt")))
	require.NoError(t, os.Rename(filepath.Join(dir, "p/c.txt"), filepath.Join(away, "c.txt")))
	hooked := false
	_, err = xB.Scan(ctx, nil, func(int64) {
		if hooked {
			return
		}
		hooked = true
		// B has written its rows and not swept yet. A's walk reaches /p
		// now: it sees a.txt after B did ...
		seenByA("/p/a.txt")
		// ... and two files created after B read /p: new.txt, which
		// gets metadata on node A, and bare.txt, which gets none.
		writeFiles(t, dir, map[string]string{"/p/new.txt": "n", "/p/bare.txt": "b"})
		_, err := nodeA.setMeta(ctx, xA, "/p/new.txt", project)
		require.NoError(t, err)
		seenByA("/p/new.txt")
		seenByA("/p/bare.txt")
		// The moved file is back, seen by no walk.
		require.NoError(t, os.Rename(filepath.Join(away, "c.txt"), filepath.Join(dir, "p/c.txt")))
	})
	require.NoError(t, err)
	require.True(t, hooked)
	// A ends its walk (/q) and sweeps.
	seenByA("/q/z.txt")
	require.NoError(t, xA.sweep(ctx, idA, []string{""}, 6))

	check := func(when string) {
		t.Helper()
		for _, p := range []string{"/p/a.txt", "/p/c.txt", "/p/new.txt"} {
			m, err := xB.storedMeta(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, "apollo", m.Fields["project"], "%s: metadata of %s", when, p)
		}
		var tagged []string
		rows, err := xB.db.QueryContext(ctx, `SELECT path FROM file_meta WHERE key = 'project' ORDER BY path`)
		require.NoError(t, err)
		for rows.Next() {
			var p string
			require.NoError(t, rows.Scan(&p))
			tagged = append(tagged, p)
		}
		require.NoError(t, rows.Close())
		assert.Equal(t, []string{"/p/a.txt", "/p/c.txt", "/p/new.txt"}, tagged, "%s: searchable metadata", when)
		files, _, err := xB.Query(ctx, IndexQuery{Path: "/", Recursive: true, Limit: 100})
		require.NoError(t, err)
		assert.Equal(t, []string{"/p", "/p/a.txt", "/p/bare.txt", "/p/c.txt", "/p/new.txt", "/q", "/q/z.txt"},
			paths(files), "%s: rows (gone.txt deleted)", when)
	}
	check("after both sweeps")
	// The next scan agrees.
	_, err = xA.Scan(ctx, nil, nil)
	require.NoError(t, err)
	check("after the next scan")
}

// TestScanKeepsASymlinksMetadata: on a root with user xattrs, a file's
// metadata lives in its xattrs and a scan reads it from there; a symlink
// takes no user xattrs, so its metadata lives in the index only, and a
// scan (which found none in xattrs) wrote it away.
func TestScanKeepsASymlinksMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"/f.txt": "f"})
	require.NoError(t, os.Symlink("f.txt", filepath.Join(dir, "link")))
	root := newRoot(t, dir, false)
	require.True(t, root.state.xattr, "the files' metadata must live in xattrs")
	x, err := root.Files()
	require.NoError(t, err)
	node := &Activities{Root: root, Site: "s"}
	v := "apollo"
	for _, p := range []string{"/f.txt", "/link"} {
		_, err = node.setMeta(ctx, x, p, MetaChange{Set: map[string]*string{"project": &v}})
		require.NoError(t, err)
	}
	_, err = x.Scan(ctx, nil, nil)
	require.NoError(t, err)
	for _, p := range []string{"/f.txt", "/link"} {
		m, err := x.storedMeta(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "apollo", m.Fields["project"], "metadata of %s after a scan", p)
	}
}
