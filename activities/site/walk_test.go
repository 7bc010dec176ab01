package site

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// walkTestTree builds 300 files in d00..d09/e00..e06 plus a symlink, an
// empty directory and a fifo.
func walkTestTree(t *testing.T) (string, map[string]testFile) {
	t.Helper()
	dir := t.TempDir()
	files := makeTree(t, dir, 300, func(i int) int { return i * 10 })
	require.NoError(t, os.Symlink("d00", filepath.Join(dir, "link")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, mkfifo(filepath.Join(dir, "fifo")))
	return dir, files
}

func TestWalk(t *testing.T) {
	t.Parallel()
	dir, files := walkTestTree(t)
	root := newRoot(t, dir, true)
	// Index state creates the .hub folder, which walks must skip.
	_, err := root.state.store(filepath.Join(dir, "d00/e00/f0000.bin"), "d00/e00/f0000.bin", Record{State: Premigrated})
	require.NoError(t, err)

	dirs := map[string]bool{"/empty": true}
	for p := range files {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}

	tests := []struct {
		name  string
		paths []string
		opts  WalkOptions
		want  func(e Entry) bool // which entries of the full tree are expected
	}{
		{"everything", []string{"/"}, WalkOptions{}, func(Entry) bool { return true }},
		{"files only, tiny batches", []string{"/"}, WalkOptions{Types: []string{TypeFile}, BatchSize: 7, Workers: 3},
			func(e Entry) bool { return e.Type == TypeFile }},
		{"symlinks and dirs", []string{""}, WalkOptions{Types: []string{TypeSymlink, TypeDirectory}},
			func(e Entry) bool { return e.Type != TypeFile }},
		{"include", []string{"/"}, WalkOptions{Include: []string{"**/f00[0-4]?.bin"}},
			func(e Entry) bool {
				return strings.HasPrefix(filepath.Base(e.Path), "f00") && e.Path[len(e.Path)-6] <= '4'
			}},
		{"exclude prunes directories", []string{"/"}, WalkOptions{Exclude: []string{"d0[0-4]", "/d05/e0[0-2]", "**/*9.bin"}},
			func(e Entry) bool {
				return !strings.HasPrefix(e.Path, "/d0") || (e.Path[3] >= '5' &&
					!strings.HasPrefix(e.Path, "/d05/e00") && !strings.HasPrefix(e.Path, "/d05/e01") &&
					!strings.HasPrefix(e.Path, "/d05/e02") && !strings.HasSuffix(e.Path, "9.bin"))
			}},
		{"overlapping paths", []string{"/d01", "/d01/e02", "d01/e03/f0031.bin", "/d02/e00/f0002.bin", "/link"}, WalkOptions{},
			func(e Entry) bool {
				return e.Path == "/d01" || strings.HasPrefix(e.Path, "/d01/") || e.Path == "/d02/e00/f0002.bin" || e.Path == "/link"
			}},
		{"state filter", []string{"/"}, WalkOptions{States: []State{Premigrated}}, func(e Entry) bool { return false }},
		{"byte batches", []string{"/"}, WalkOptions{BatchBytes: 5000}, func(Entry) bool { return true }},
		{"auto batches", []string{"/"}, WalkOptions{AutoBatch: true}, func(Entry) bool { return true }},
	}
	all := map[string]Entry{}
	for p, f := range files {
		all[p] = Entry{Path: p, Type: TypeFile, Size: int64(len(f.data)), State: Resident}
	}
	for d := range dirs {
		all[d] = Entry{Path: d, Type: TypeDirectory, State: Resident}
	}
	all["/link"] = Entry{Path: "/link", Type: TypeSymlink, Size: 3, State: Resident}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var batches [][]Entry
			got := map[string]Entry{}
			err := Walk(context.Background(), root, tt.paths, tt.opts, func(b []Entry) error {
				batches = append(batches, b)
				for _, e := range b {
					_, dup := got[e.Path]
					require.False(t, dup, "%s reported twice", e.Path)
					got[e.Path] = e
				}
				return nil
			})
			require.NoError(t, err)
			var want []string
			for p, e := range all {
				if tt.want(e) {
					want = append(want, p)
				}
			}
			var gotPaths []string
			for p, e := range got {
				gotPaths = append(gotPaths, p)
				exp := all[p]
				require.Equal(t, exp.Type, e.Type, p)
				require.Equal(t, exp.Size, e.Size, p)
				require.Equal(t, exp.State, e.State, p)
				if f, ok := files[p]; ok {
					require.True(t, f.mtime.Equal(e.Mtime), p)
				}
			}
			sort.Strings(want)
			sort.Strings(gotPaths)
			require.Equal(t, want, gotPaths)

			for i, b := range batches {
				require.NotEmpty(t, b)
				limit := tt.opts.BatchSize
				if limit == 0 {
					limit = defaultBatchSize
				}
				require.LessOrEqual(t, len(b), limit)
				if tt.opts.BatchBytes > 0 && i < len(batches)-1 {
					// A batch closes on the file that reaches the limit.
					var sum int64
					for _, e := range b {
						sum += e.Size
					}
					require.GreaterOrEqual(t, sum, tt.opts.BatchBytes)
					require.Less(t, sum-b[len(b)-1].Size, tt.opts.BatchBytes)
				}
			}
		})
	}
}

func TestWalkErrors(t *testing.T) {
	t.Parallel()
	dir, _ := walkTestTree(t)
	root := newRoot(t, dir, false)
	ctx := context.Background()
	noop := func([]Entry) error { return nil }

	require.ErrorContains(t, Walk(ctx, root, []string{"/nope"}, WalkOptions{}, noop), "/nope")
	require.ErrorIs(t, Walk(ctx, root, []string{"/../x"}, WalkOptions{}, noop), ErrOutsideRoot)
	require.ErrorContains(t, Walk(ctx, root, []string{"/"}, WalkOptions{Include: []string{"[a"}}, noop), "invalid pattern")
	require.ErrorContains(t, Walk(ctx, root, []string{"/"}, WalkOptions{Types: []string{"fifo"}}, noop), "unknown type")

	stop := errors.New("stop")
	calls := 0
	err := Walk(ctx, root, []string{"/"}, WalkOptions{BatchSize: 10}, func([]Entry) error {
		calls++
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls, "emit is not called after it failed")

	cctx, cancel := context.WithCancel(ctx)
	err = Walk(cctx, root, []string{"/"}, WalkOptions{BatchSize: 10}, func([]Entry) error {
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
}

func TestAutoBatchSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		meanSize int64
		want     int
	}{
		{0, autoMaxBatch},
		{4 << 10, autoMaxBatch},
		{1 << 20, 4000},
		{100 << 20, 59},
		{1 << 30, 5},
		{1 << 40, autoMinBatch},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, autoBatchSize(10, 10*tt.meanSize), "mean %d", tt.meanSize)
	}
	require.Equal(t, defaultBatchSize, autoBatchSize(0, 0))
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// TestWalkKeepsFolderAccessTimes: a job's discovery or a policy's scan
// lists every folder; that is not the users' access (see fsutil.NoAtime).
// The folders were last read in 2020; the kernel (relatime) moves an access
// time that old on the next listing.
func TestWalkKeepsFolderAccessTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := makeTree(t, dir, 50, func(i int) int { return i })
	root := newRoot(t, dir, false)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".hub"), 0o755)) // as the first step makes it
	var folders []string                                               // found without listing any
	for p := range files {
		for d := filepath.Dir(filepath.Join(dir, p)); d != dir; d = filepath.Dir(d) {
			if !slices.Contains(folders, d) {
				folders = append(folders, d)
			}
		}
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	atime := func(p string) time.Time {
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(p, &st))
		return time.Unix(st.Atim.Sec, st.Atim.Nsec).UTC()
	}
	for _, p := range append(folders, dir) {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.Chtimes(p, old, fi.ModTime()))
	}
	n := 0
	require.NoError(t, Walk(context.Background(), root, []string{"/"}, WalkOptions{}, func(b []Entry) error {
		n += len(b)
		return nil
	}))
	require.Greater(t, n, 50)
	for _, p := range append(folders, dir) {
		require.Equal(t, old, atime(p), "the walk moved the access time of %s", p)
	}
	// The check means something only where listing moves an access time.
	_, err := os.ReadDir(folders[0])
	require.NoError(t, err)
	require.NotEqual(t, old, atime(folders[0]), "this filesystem keeps access times by itself (noatime?)")
}
