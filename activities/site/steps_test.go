package site

import (
	"bytes"
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestLifecycle premigrates, migrates and recalls 1,000 files in nested
// directories through each driver and state backend, running every step
// twice to check idempotency.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		target     func(testing.TB) targets.Driver
		indexState bool
	}{
		{"filesystem target, xattr state", fsTarget, false},
		{"filesystem target, index state", fsTarget, true},
		{"s3 target", s3Target, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			files := makeTree(t, dir, 1000, func(i int) int {
				switch {
				case i%100 == 0:
					return 256<<10 + i
				case i%17 == 0:
					return 0
				default:
					return 1 + (i*37)%6000
				}
			})
			paths := sortedPaths(files)
			root := newRoot(t, dir, tt.indexState)
			if tt.indexState || !xattrSupported(dir) {
				require.Equal(t, "index", root.StateBackend())
			} else {
				require.Equal(t, "xattr", root.StateBackend())
			}
			target := tt.target(t)
			opts := StepOptions{StubSize: 16}
			var progressed atomic.Int64
			opts.Progress = func(done int) { progressed.Store(int64(done)) }

			// Premigrate: every object byte-identical, files untouched.
			res, err := Premigrate(ctx, root, paths, target, "tgt", opts)
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			require.Equal(t, int64(len(paths)), progressed.Load())
			for p, f := range files {
				rc, err := target.Get(ctx, contentKey(sha(f.data)))
				require.NoError(t, err)
				got, err := io.ReadAll(rc)
				require.NoError(t, err)
				require.NoError(t, rc.Close())
				require.Equal(t, f.data, got, p)
			}
			requireFiles(t, dir, files)
			requireStates(t, root, files, Premigrated)
			res, err = Premigrate(ctx, root, paths, target, "tgt", opts)
			require.NoError(t, err)
			requireAll(t, res, CodeSkipped, paths)
			contents := distinctContents(files)
			require.Equal(t, contents, countContent(t, target))
			require.Equal(t, len(paths), countRefs(t, target))

			// Migrate: stubs keep StubSize bytes and the original mtime.
			before := map[string]int64{}
			for p := range files {
				before[p] = blocks(t, filepath.Join(dir, p))
			}
			res, err = Migrate(ctx, root, paths, target, "tgt", opts)
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			for p, f := range files {
				abs := filepath.Join(dir, p)
				got, err := os.ReadFile(abs)
				require.NoError(t, err)
				require.Equal(t, f.data[:min(16, len(f.data))], got, p)
				fi, err := os.Stat(abs)
				require.NoError(t, err)
				require.True(t, f.mtime.Equal(fi.ModTime()), p)
				if len(f.data) > 64<<10 {
					require.Less(t, blocks(t, abs), before[p]/8, "%s: a stub frees its data blocks", p)
				}
			}
			entries := requireStates(t, root, files, Migrated)
			for p, f := range files {
				require.Equal(t, int64(len(f.data)), entries[p].Size, "walk reports the original size")
			}
			res, err = Migrate(ctx, root, paths, target, "tgt", opts)
			require.NoError(t, err)
			requireAll(t, res, CodeSkipped, paths)
			res, err = Premigrate(ctx, root, paths, target, "tgt", opts)
			require.NoError(t, err)
			requireAll(t, res, CodeSkipped, paths)
			require.Equal(t, contents, countContent(t, target))

			// Recall: byte-identical with original mtimes; the files stay
			// premigrated, their remote copies referenced.
			res, err = Recall(ctx, root, paths, only("tgt", target), opts)
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			requireFiles(t, dir, files)
			requireStates(t, root, files, Premigrated)
			res, err = Recall(ctx, root, paths, only("tgt", target), opts)
			require.NoError(t, err)
			requireAll(t, res, CodeSkipped, paths)
			require.Equal(t, contents, countContent(t, target))
			require.Equal(t, len(paths), countRefs(t, target))

			// Migrating again moves no data; a recall with DeleteOnRecall
			// then drops every reference, and the collector empties the
			// target.
			res, err = Migrate(ctx, root, paths, target, "tgt", opts)
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			require.Equal(t, "already premigrated", res[0].Message)
			opts.DeleteOnRecall = true
			res, err = Recall(ctx, root, paths, only("tgt", target), opts)
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			requireFiles(t, dir, files)
			requireStates(t, root, files, Resident)
			require.Zero(t, countRefs(t, target))
			require.Equal(t, contents, countContent(t, target), "nothing is deleted by a step")
			cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
			require.NoError(t, err)
			require.Equal(t, CollectResult{Objects: contents, Trashed: contents, Deleted: contents}, cr)
			require.Zero(t, countObjects(t, target))
		})
	}
}

// requireStates walks the root and checks the state of every file.
func requireStates(t *testing.T, root *Root, files map[string]testFile, want State) map[string]Entry {
	t.Helper()
	entries := walkAll(t, root, []string{"/"}, WalkOptions{Types: []string{TypeFile}})
	require.Len(t, entries, len(files))
	for p := range files {
		require.Equal(t, want, entries[p].State, p)
	}
	return entries
}

func TestModifiedFileBecomesResident(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("v1"), 0o644))
	root := newRoot(t, dir, false)
	target := fsTarget(t)

	res, err := Premigrate(ctx, root, []string{"/a.txt"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a.txt"})

	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("version 2"), 0o644))
	e, rec, err := root.Stat("/a.txt")
	require.NoError(t, err)
	require.Equal(t, Resident, e.State)
	require.Nil(t, rec)

	res, err = Premigrate(ctx, root, []string{"/a.txt"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a.txt"})
	require.Equal(t, "uploaded", res[0].Message)
	rc, err := target.Get(ctx, contentKey(sha([]byte("version 2"))))
	require.NoError(t, err)
	got, _ := io.ReadAll(rc)
	rc.Close()
	require.Equal(t, "version 2", string(got))
	// Both versions are on the target, each under its own name; only the
	// current one is referenced, so the collector frees the first.
	require.Equal(t, 2, countContent(t, target))
	require.Equal(t, 1, countRefs(t, target))
	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Deleted)
	_, err = target.Stat(ctx, contentKey(sha([]byte("version 2"))))
	require.NoError(t, err)
}

func TestStepsReportPerPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	outside := t.TempDir()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("data"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink("ok.txt", filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	root := newRoot(t, dir, false)
	target := fsTarget(t)

	paths := []string{"/ok.txt", "/missing", "/sub", "/link", "/../escape", "/out/secret", "/.hub/state.jsonl"}
	want := []struct {
		code Code
		msg  string
	}{
		{CodeOK, ""},
		{CodeFailed, "no such file"},
		{CodeSkipped, "not a regular file (directory)"},
		{CodeSkipped, "not a regular file (symlink)"},
		{CodeFailed, ErrOutsideRoot.Error()},
		{CodeFailed, ErrSymlink.Error()},
		{CodeFailed, ErrReserved.Error()},
	}
	steps := []struct {
		name string
		run  func() ([]Result, error)
	}{
		{"premigrate", func() ([]Result, error) { return Premigrate(ctx, root, paths, target, "t", StepOptions{}) }},
		{"migrate", func() ([]Result, error) { return Migrate(ctx, root, paths, target, "t", StepOptions{}) }},
		{"recall", func() ([]Result, error) { return Recall(ctx, root, paths, only("t", target), StepOptions{}) }},
	}
	for _, st := range steps {
		res, err := st.run()
		require.NoError(t, err, st.name)
		require.Len(t, res, len(paths))
		for i, r := range res {
			require.Equal(t, paths[i], r.Path)
			if i == 0 {
				continue // ok.txt moves through its states
			}
			require.Equal(t, want[i].code, r.Code, "%s %s: %s", st.name, r.Path, r.Message)
			require.Contains(t, r.Message, want[i].msg, "%s %s", st.name, r.Path)
		}
		require.Equal(t, CodeOK, res[0].Code, "%s: %s", st.name, res[0].Message)
	}
	secret, err := os.ReadFile(filepath.Join(outside, "secret"))
	require.NoError(t, err)
	require.Equal(t, "s", string(secret))
}

func TestMigrateResumesInterruptedRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	files := makeTree(t, dir, 2, func(int) int { return 5000 })
	paths := sortedPaths(files)
	root := newRoot(t, dir, false)
	target := fsTarget(t)
	res, err := Premigrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)

	// Crash after marking: one file still whole, one already truncated
	// (with the mtime the truncate gave it).
	for i, p := range paths {
		abs := filepath.Join(dir, p)
		_, rec, err := root.Stat(p)
		require.NoError(t, err)
		rec.State, rec.Pending, rec.StubSize = Migrated, pendingRelease, 10
		require.NoError(t, root.state.set(abs, p[1:], *rec))
		if i == 1 {
			require.NoError(t, os.Truncate(abs, 10))
		}
		e, _, err := root.Stat(p)
		require.NoError(t, err)
		require.Equal(t, Migrated, e.State)
	}
	res, err = Migrate(ctx, root, paths, target, "t", StepOptions{StubSize: 99})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	for p, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Equal(t, f.data[:10], got, "the interrupted run's stub size wins")
	}
	res, err = Recall(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	requireFiles(t, dir, files)
}

func TestRecallResumesAndVerifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	files := makeTree(t, dir, 3, func(int) int { return 10000 })
	paths := sortedPaths(files)
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := Migrate(ctx, root, paths, target, "t", StepOptions{StubSize: 100})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)

	// paths[0]: a recall crashed half way; paths[1]: a crash after the
	// data was written back; paths[2]: the remote copy is corrupt.
	for i, p := range paths[:2] {
		abs := filepath.Join(dir, p)
		_, rec, err := root.Stat(p)
		require.NoError(t, err)
		rec.Pending = pendingRecall
		require.NoError(t, root.state.set(abs, p[1:], *rec))
		n := 5000
		if i == 1 {
			n = 10000
		}
		require.NoError(t, os.WriteFile(abs, files[p].data[:n], 0o644))
	}
	bad := bytes.Repeat([]byte("x"), 10000)
	object := filepath.Join(tdir, filepath.FromSlash(contentKey(sha(files[paths[2]].data))))
	require.NoError(t, os.WriteFile(object, bad, 0o644))

	res, err = Recall(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeOK, res[0].Code, res[0].Message)
	require.Equal(t, CodeOK, res[1].Code, res[1].Message)
	require.Equal(t, "data was local", res[1].Message)
	require.Equal(t, CodeFailed, res[2].Code)
	require.Contains(t, res[2].Message, "does not match")
	requireFiles(t, dir, map[string]testFile{paths[0]: files[paths[0]], paths[1]: files[paths[1]]})

	// The failed file is still a valid stub that a good copy can recall.
	e, _, err := root.Stat(paths[2])
	require.NoError(t, err)
	require.Equal(t, Migrated, e.State)
	got, err := os.ReadFile(filepath.Join(dir, paths[2]))
	require.NoError(t, err)
	require.Len(t, got, 100)
	require.NoError(t, os.WriteFile(object, files[paths[2]].data, 0o644))
	res, err = Recall(ctx, root, paths[2:], only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths[2:])
	requireFiles(t, dir, files)
}

func TestReverseStubAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	files := makeTree(t, dir, 40, func(i int) int { return 100 + i })
	paths := sortedPaths(files)
	root := newRoot(t, dir, true)
	target := fsTarget(t)
	tf := only("t", target)

	res, err := Premigrate(ctx, root, paths[:10], target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths[:10])
	res, err = Migrate(ctx, root, paths[10:], target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths[10:])

	// ReverseStub: files become resident and drop their references.
	res, err = ReverseStub(ctx, root, paths[:5], tf, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths[:5])
	res, err = ReverseStub(ctx, root, paths[10:15], tf, StepOptions{DeleteRemote: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths[10:15])
	res, err = ReverseStub(ctx, root, paths[:5], tf, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeSkipped, paths[:5])
	require.Equal(t, 40, countContent(t, target), "steps never delete content")
	require.Equal(t, 30, countRefs(t, target))
	sub := map[string]testFile{}
	for _, p := range append(paths[:5:5], paths[10:15]...) {
		sub[p] = files[p]
	}
	requireFiles(t, dir, sub)

	// Delete whole directories with their remote copies.
	var dirs []string
	for _, d := range []string{"/d00", "/d01", "/d02", "/d03", "/d04", "/d05", "/d06", "/d07", "/d08", "/d09"} {
		dirs = append(dirs, d)
	}
	res, err = Delete(ctx, root, dirs, tf, StepOptions{DeleteRemote: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, dirs)
	require.Zero(t, countRefs(t, target))
	res, err = Delete(ctx, root, dirs, tf, StepOptions{DeleteRemote: true})
	require.NoError(t, err)
	requireAll(t, res, CodeSkipped, dirs)
	res, err = Delete(ctx, root, []string{"/"}, tf, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeFailed, []string{"/"})
	require.Empty(t, walkAll(t, root, []string{"/"}, WalkOptions{}))
	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Equal(t, 40, cr.Deleted)
	require.Zero(t, countContent(t, target))
}

func TestCopyIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	outside := t.TempDir()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	root := newRoot(t, dir, false)
	mtime := time.Date(2021, 5, 6, 7, 8, 9, 123456789, time.UTC)

	tests := []struct {
		name    string
		path    string
		data    string
		size    int64
		wantErr string
	}{
		{"nested new file", "/a/b/c.txt", "hello", 5, ""},
		{"unknown size", "a/d.txt", "stream", -1, ""},
		{"replace", "/a/b/c.txt", "replaced", 8, ""},
		{"short data", "/a/short.txt", "abc", 10, "expected 10"},
		{"escape", "/../x.txt", "x", 1, ErrOutsideRoot.Error()},
		{"through symlink", "/out/x.txt", "x", 1, ErrSymlink.Error()},
		{"reserved", "/.hub/x", "x", 1, ErrReserved.Error()},
		{"directory", "/a", "x", 1, "is a directory"},
	}
	for _, tt := range tests {
		err := CopyIn(ctx, root, tt.path, strings.NewReader(tt.data), tt.size, mtime)
		if tt.wantErr != "" {
			require.ErrorContains(t, err, tt.wantErr, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		abs, err := root.Resolve(tt.path)
		require.NoError(t, err)
		got, err := os.ReadFile(abs)
		require.NoError(t, err)
		require.Equal(t, tt.data, string(got), tt.name)
		fi, err := os.Stat(abs)
		require.NoError(t, err)
		require.True(t, mtime.Equal(fi.ModTime()), tt.name)
	}
	_, err := os.Stat(filepath.Join(dir, "a", "short.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries)

	// Copying over a migrated stub replaces it with a resident file.
	target := fsTarget(t)
	res, err := Migrate(ctx, root, []string{"/a/d.txt"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a/d.txt"})
	require.NoError(t, CopyIn(ctx, root, "/a/d.txt", strings.NewReader("new"), 3, time.Time{}))
	e, _, err := root.Stat("/a/d.txt")
	require.NoError(t, err)
	require.Equal(t, Resident, e.State)
}

// cancelAfter cancels ctx once its Put has consumed limit bytes and counts
// what was read, to show a long copy stops promptly.
type cancelAfter struct {
	targets.Driver
	limit  int64
	cancel context.CancelFunc
	read   atomic.Int64
}

func (c *cancelAfter) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return c.Driver.Put(ctx, key, readerFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		if c.read.Add(int64(n)) >= c.limit {
			c.cancel()
		}
		return n, err
	}), size)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestCancellation(t *testing.T) {
	t.Parallel()

	t.Run("between files", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		files := makeTree(t, dir, 500, func(int) int { return 1000 })
		paths := sortedPaths(files)
		root := newRoot(t, dir, false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opts := StepOptions{Workers: 2, Progress: func(done int) {
			if done == 10 {
				cancel()
			}
		}}
		res, err := Premigrate(ctx, root, paths, fsTarget(t), "t", opts)
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, res, len(paths))
		cancelled := 0
		for _, r := range res {
			if r.Code == CodeFailed && strings.Contains(r.Message, "cancel") {
				cancelled++
			}
		}
		require.Greater(t, cancelled, len(paths)-20)
		for _, r := range res {
			e, _, err := root.Stat(r.Path)
			require.NoError(t, err)
			if r.Code == CodeOK {
				require.Equal(t, Premigrated, e.State, "files copied before the cancel are recorded")
			} else {
				require.Equal(t, Resident, e.State)
			}
		}
	})

	t.Run("inside a large file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		const size = 64 << 20
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, size), 0o644))
		root := newRoot(t, dir, false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		target := &cancelAfter{Driver: fsTarget(t), limit: 1 << 20, cancel: cancel}
		res, err := Migrate(ctx, root, []string{"/big"}, target, "t", StepOptions{})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, CodeFailed, res[0].Code)
		require.Less(t, target.read.Load(), int64(2<<20), "the copy stops right after the cancel")
		fi, err := os.Stat(filepath.Join(dir, "big"))
		require.NoError(t, err)
		require.Equal(t, int64(size), fi.Size(), "nothing released")
		_, err = target.Stat(context.Background(), path.Base("big"))
		require.ErrorIs(t, err, targets.ErrNotFound)
	})
}

// TestStepsLeaveTimesAlone: the hub's own reading of a file (premigrate's
// checksum and copy, migrate's check, recall's, a snapshot's copy) is not
// the users' access, and policies, search and analytics read the access
// time as theirs; nor does a step change the users' folders (a recall's
// download goes to an unnamed file). The tree's files were last read in
// 2020; the kernel (relatime) moves an access time that old on the next
// read.
func TestStepsLeaveTimesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	files := makeTree(t, dir, 20, func(i int) int { return 100 + i })
	paths := sortedPaths(files)
	atime := func(p string) time.Time {
		t.Helper()
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(filepath.Join(dir, filepath.FromSlash(p)), &st))
		return time.Unix(st.Atim.Sec, st.Atim.Nsec)
	}
	// The users' folders and their times: not the hub's own, .hub, nor the
	// root, where the first step makes .hub.
	folders := func() map[string]time.Time {
		t.Helper()
		m := map[string]time.Time{}
		require.NoError(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			require.NoError(t, err)
			if e.Name() == ".hub" {
				return filepath.SkipDir
			}
			if e.IsDir() && p != dir {
				fi, err := e.Info()
				require.NoError(t, err)
				m[p] = fi.ModTime()
			}
			return nil
		}))
		return m
	}
	before, foldersBefore := map[string]time.Time{}, folders()
	for _, p := range paths {
		before[p] = atime(p)
		require.Less(t, before[p].Year(), 2021, p)
	}
	requireKept := func(step string) {
		t.Helper()
		for _, p := range paths {
			require.True(t, atime(p).Equal(before[p]), "%s changed the access time of %s: %v", step, p, atime(p))
		}
		require.Equal(t, foldersBefore, folders(), "%s changed a folder", step)
	}
	root := newRoot(t, dir, false)
	target := fsTarget(t)
	res, err := Premigrate(ctx, root, paths, target, "tgt", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	requireKept("premigrate")
	res, err = Migrate(ctx, root, paths, target, "tgt", StepOptions{StubSize: 16})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	requireKept("migrate")
	res, err = Recall(ctx, root, paths, func(string) (targets.Driver, error) { return target, nil }, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	requireKept("recall")
	_, err = cjCopyFile(context.Background(), root, strings.TrimPrefix(paths[0], "/"), filepath.Join(t.TempDir(), "copy"), nil)
	require.NoError(t, err)
	requireKept("a snapshot's copy")

	// The check above means something only where reading moves an access
	// time: reading as anyone else does must move it.
	_, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(paths[0])))
	require.NoError(t, err)
	require.False(t, atime(paths[0]).Equal(before[paths[0]]), "this filesystem keeps access times by itself (noatime?): the test proves nothing here")
	requireFiles(t, dir, files) // recalled whole
}
