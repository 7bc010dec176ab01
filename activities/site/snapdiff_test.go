package site

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type change struct {
	Change  Change
	Path    string
	OldPath string
}

func runSnapdiff(t *testing.T, root *Root, managed, manifests string) ([]change, *SnapdiffResult) {
	t.Helper()
	var got []change
	res, err := Snapdiff(context.Background(), root, managed, manifests, func(batch []DiffEntry) error {
		for _, d := range batch {
			got = append(got, change{d.Change, d.Path, d.OldPath})
		}
		return nil
	})
	require.NoError(t, err)
	sort.Slice(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	return got, res
}

func TestSnapdiff(t *testing.T) {
	t.Parallel()
	dir, manifests := t.TempDir(), t.TempDir()
	write := func(rel, content string, mtime time.Time) {
		abs := filepath.Join(dir, "proj", filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(content), 0o644))
		require.NoError(t, os.Chtimes(abs, mtime, mtime))
	}
	t0 := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	write("a.txt", "a", t0)
	write("b.txt", "b", t0)
	write("sub/c.txt", "c", t0)
	write("sub/d.txt", "d", t0)
	write("dirA/x.txt", "x", t0)
	write("keep.txt", "keep", t0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "outside.txt"), nil, 0o644))
	root := newRoot(t, dir, false)
	p := func(rel string) string { return "/proj/" + rel }

	// First run: everything is created, including the managed folder.
	got, res := runSnapdiff(t, root, "/proj", manifests)
	var want []change
	for _, rel := range []string{"", "a.txt", "b.txt", "dirA", "dirA/x.txt", "keep.txt", "sub", "sub/c.txt", "sub/d.txt"} {
		path := "/proj"
		if rel != "" {
			path = p(rel)
		}
		want = append(want, change{Created, path, ""})
	}
	require.Equal(t, want, got)
	require.Equal(t, 9, res.Created)
	require.Equal(t, 9, res.Entries)

	// Until committed, the next run diffs against the same (empty) base.
	require.NoError(t, res.Discard())
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Len(t, got, 9)
	require.NoError(t, res.Commit())
	require.NoError(t, res.Commit(), "committing twice is harmless")
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Empty(t, got)
	require.NoError(t, res.Commit())

	// Update, move (a file and a directory), delete and create.
	write("b.txt", "bb", t0.Add(time.Hour))
	require.NoError(t, os.Rename(filepath.Join(dir, "proj/sub/c.txt"), filepath.Join(dir, "proj/sub/c2.txt")))
	require.NoError(t, os.Rename(filepath.Join(dir, "proj/dirA"), filepath.Join(dir, "proj/dirB")))
	// f.txt has d.txt's size and mtime and often gets its inode number
	// too: only the birth time tells it is not d.txt moved.
	require.NoError(t, os.Remove(filepath.Join(dir, "proj/sub/d.txt")))
	write("f.txt", "f", t0)
	want = []change{
		{Updated, p("b.txt"), ""},
		{Moved, p("dirB"), p("dirA")},
		{Moved, p("dirB/x.txt"), p("dirA/x.txt")},
		{Created, p("f.txt"), ""},
		{Moved, p("sub/c2.txt"), p("sub/c.txt")},
		{Deleted, p("sub/d.txt"), ""},
	}
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Equal(t, want, got)
	require.Equal(t, SnapdiffResult{Created: 1, Updated: 1, Moved: 3, Deleted: 1, Entries: 9, Pending: res.Pending}, *res)
	require.NoError(t, res.Commit())

	// Migrating a file is no content change: stubs keep size and mtime.
	target := fsTarget(t)
	mres, err := Migrate(context.Background(), root, []string{p("keep.txt")}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, mres, CodeOK, []string{p("keep.txt")})
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Empty(t, got)
	require.NoError(t, res.Commit())

	// A file replaced by a directory is a deletion and a creation.
	require.NoError(t, os.Remove(filepath.Join(dir, "proj/a.txt")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "proj/a.txt"), 0o755))
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.ElementsMatch(t, []change{{Created, p("a.txt"), ""}, {Deleted, p("a.txt"), ""}}, got)
	require.NoError(t, res.Commit())

	// Other managed paths have their own manifest; a vanished managed
	// path reports everything as deleted.
	got, res = runSnapdiff(t, root, "/proj/sub", manifests)
	require.Equal(t, []change{{Created, "/proj/sub", ""}, {Created, p("sub/c2.txt"), ""}}, got)
	require.NoError(t, res.Commit())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "proj/sub")))
	got, res = runSnapdiff(t, root, "/proj/sub", manifests)
	require.Equal(t, []change{{Deleted, "/proj/sub", ""}, {Deleted, p("sub/c2.txt"), ""}}, got)
	require.NoError(t, res.Commit())

	entries, err := os.ReadDir(manifests)
	require.NoError(t, err)
	require.Len(t, entries, 2, "one manifest per managed path, no pending leftovers")
}

func TestCommitSnapdiffRejectsOtherFiles(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "important.txt")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	require.ErrorContains(t, CommitSnapdiff(f), "not a pending manifest")
	require.ErrorContains(t, DiscardSnapdiff(f), "not a pending manifest")
	_, err := os.Stat(f)
	require.NoError(t, err)
}
