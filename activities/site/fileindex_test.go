package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		abs := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
	}
}

func paths(files []FoundFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

// TestFileIndexSearch scans a real tree, sets metadata through the site
// activity (xattrs where the filesystem has them, the index where not)
// and checks each filter against what is on disk.
func TestFileIndexSearch(t *testing.T) {
	t.Parallel()
	for _, indexOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "xattr", true: "index-only"}[indexOnly], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a := newTestActivities(t)
			if indexOnly {
				a.Root = newRoot(t, a.Root.Dir(), true)
				// A fresh Root of the same folder shares the index.
			}
			writeFiles(t, a.Root.Dir(), map[string]string{
				"/p/a.txt": "aaaa", "/p/b.txt": "bb", "/p/c.bin": "cccccccccc", "/p/q/d.txt": "d", "/r/a.txt": "x",
			})
			old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			require.NoError(t, os.Chtimes(filepath.Join(a.Root.Dir(), "p/b.txt"), old, old))
			v := "apollo"
			out, err := a.SetMetadata(ctx, SetMetadataInput{Paths: []string{"/p/a.txt", "/p/q/d.txt", "/nope"},
				Change: MetaChange{Set: map[string]*string{"project": &v}, AddTags: []string{"hot", "red"}}})
			require.NoError(t, err)
			require.Equal(t, "apollo", out.Results[0].Metadata["project"])
			require.Equal(t, []string{"hot", "red"}, out.Results[0].Tags)
			require.Contains(t, out.Results[2].Error, "does not exist")
			if !indexOnly && a.Root.StateBackend() == "xattr" {
				b, err := lgetxattr(filepath.Join(a.Root.Dir(), "p/a.txt"), "user.hub.meta.project")
				require.NoError(t, err)
				require.Equal(t, "apollo", string(b))
			}
			// A scan keeps the metadata (read back from the file, or kept in
			// the index where the root has no xattrs).
			res, err := a.ScanFileIndex(ctx, ScanFileIndexInput{})
			require.NoError(t, err)
			require.Equal(t, int64(8), res.Entries, "5 files and folders p, p/q, r")
			require.False(t, res.Index.Scanned.IsZero())

			x, err := a.Root.Files()
			require.NoError(t, err)
			q := func(p string, rec bool, f SearchFilters, fields ...string) []FoundFile {
				t.Helper()
				files, _, err := x.Query(ctx, IndexQuery{Path: p, Recursive: rec, Filters: f, Fields: fields, Limit: 100})
				require.NoError(t, err)
				return files
			}
			i64 := func(v int64) *int64 { return &v }
			require.Equal(t, []string{"/p/a.txt", "/p/b.txt", "/p/q/d.txt", "/r/a.txt"}, paths(q("/", true, SearchFilters{Name: "*.txt"})))
			require.Equal(t, []string{"/p/a.txt", "/p/b.txt"}, paths(q("/p", false, SearchFilters{Name: "*.txt"})))
			require.Equal(t, []string{"/p/a.txt", "/r/a.txt"}, paths(q("/", true, SearchFilters{Name: "a.txt"})))
			require.Equal(t, []string{"/p", "/p/q", "/r"}, paths(q("/", true, SearchFilters{Type: []string{TypeDirectory}})))
			require.Equal(t, []string{"/p/a.txt", "/p/c.bin"}, paths(q("/", true, SearchFilters{Size: &SizeRange{Min: i64(3), Max: i64(10)}})))
			before := old.Add(time.Hour)
			require.Equal(t, []string{"/p/b.txt"}, paths(q("/", true, SearchFilters{Mtime: &TimeRange{Before: &before}})))
			require.Equal(t, []string{"/p/a.txt", "/p/q/d.txt"}, paths(q("/", true, SearchFilters{Tags: []string{"red", "hot"}})))
			require.Empty(t, q("/", true, SearchFilters{Tags: []string{"cold"}}))
			got := q("/", true, SearchFilters{Metadata: map[string]string{"project": "apollo"}}, "project", "tags")
			require.Equal(t, []string{"/p/a.txt", "/p/q/d.txt"}, paths(got))
			require.Equal(t, map[string]any{"project": "apollo", "tags": []string{"hot", "red"}}, got[0].Metadata)
			require.Len(t, q("/", true, SearchFilters{Metadata: map[string]string{"project": "*"}, State: []State{Resident}}), 2)
			require.Empty(t, q("/", true, SearchFilters{State: []State{Migrated}}))

			// Paging runs in path order with a cursor.
			page, next, err := x.Query(ctx, IndexQuery{Path: "/", Recursive: true, Limit: 3})
			require.NoError(t, err)
			require.Equal(t, []string{"/p", "/p/a.txt", "/p/b.txt"}, paths(page))
			page, next, err = x.Query(ctx, IndexQuery{Path: "/", Recursive: true, Limit: 10, After: next})
			require.NoError(t, err)
			require.Equal(t, "", next)
			require.Len(t, page, 5)

			// Removing a tag and a field shows at once; a file gone from
			// disk leaves the index with Refresh (what steps call) and a
			// scan sweeps what nobody told it about.
			_, err = a.SetMetadata(ctx, SetMetadataInput{Paths: []string{"/p/a.txt"},
				Change: MetaChange{Set: map[string]*string{"project": nil}, RemoveTags: []string{"red"}}})
			require.NoError(t, err)
			require.Equal(t, []string{"/p/q/d.txt"}, paths(q("/", true, SearchFilters{Tags: []string{"red"}})))
			require.Equal(t, []string{"/p/q/d.txt"}, paths(q("/", true, SearchFilters{Metadata: map[string]string{"project": "*"}})))
			require.NoError(t, os.Remove(filepath.Join(a.Root.Dir(), "p/c.bin")))
			require.NoError(t, x.Refresh(ctx, []string{"/p/c.bin"}, false))
			require.Empty(t, q("/", true, SearchFilters{Name: "c.bin"}))
			require.NoError(t, os.RemoveAll(filepath.Join(a.Root.Dir(), "r")))
			writeFiles(t, a.Root.Dir(), map[string]string{"/p/new.txt": "n"})
			_, err = a.ScanFileIndex(ctx, ScanFileIndexInput{})
			require.NoError(t, err)
			require.Equal(t, []string{"/p/a.txt", "/p/b.txt", "/p/new.txt", "/p/q/d.txt"}, paths(q("/", true, SearchFilters{Name: "*.txt"})))
			require.Equal(t, []string{"/p/q/d.txt"}, paths(q("/", true, SearchFilters{Tags: []string{"red"}})), "metadata survives a scan")
		})
	}
}

// TestFileIndexFollowsSteps: a migration step updates the state the index
// holds without a scan.
func TestFileIndexFollowsSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newTestActivities(t)
	writeFiles(t, a.Root.Dir(), map[string]string{"/d/f1": "hello world", "/d/f2": "other data"})
	_, err := a.ScanFileIndex(ctx, ScanFileIndexInput{})
	require.NoError(t, err)
	x, err := a.Root.Files()
	require.NoError(t, err)
	_, err = Migrate(ctx, a.Root, []string{"/d/f1"}, fsTarget(t), "t1", StepOptions{})
	require.NoError(t, err)
	files, _, err := x.Query(ctx, IndexQuery{Path: "/", Recursive: true, Filters: SearchFilters{State: []State{Migrated}}, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"/d/f1"}, paths(files))
	require.Equal(t, int64(11), files[0].Size, "a stub keeps its logical size")
}

func TestSearchFiltersValidate(t *testing.T) {
	t.Parallel()
	neg := int64(-1)
	after := time.Now()
	for field, f := range map[string]SearchFilters{
		"filters.name":     {Name: "a/b"},
		"filters.type":     {Type: []string{"pipe"}},
		"filters.size":     {Size: &SizeRange{Min: &neg}},
		"filters.mtime":    {Mtime: &TimeRange{After: &after, Before: &after}},
		"filters.state":    {State: []State{"gone"}},
		"filters.tags":     {Tags: []string{"a,b"}},
		"filters.metadata": {Metadata: map[string]string{"bad key": "v"}},
	} {
		err := f.Validate()
		var fe *FilterError
		require.ErrorAs(t, err, &fe, field)
		require.Equal(t, field, fe.Field)
	}
}
