package site

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// faultScenario is every step that writes, in the order a file lives
// through them: migrate, recall (stays premigrated), premigrate again
// overwriting the objects, migrate again (no upload), recall making it
// resident (reference dropped), and collection.
// Run again after a crash, it must finish what the crash interrupted.
func faultScenario(t *testing.T, dir, tdir string, index bool) {
	t.Helper()
	ctx := context.Background()
	root := newRoot(t, dir, index)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	paths := []string{"/a/small.bin", "/a/b/large.bin"}
	tf := only("t", target)
	// The last migrate writes each marker on its own (Create), as on a
	// filesystem without unnamed files; the first in a shared body.
	oneByOne := markersOneByOne{target.(*targets.Filesystem)}
	steps := []func() ([]Result, error){
		func() ([]Result, error) { return Migrate(ctx, root, paths, target, "t", StepOptions{StubSize: 100}) },
		func() ([]Result, error) { return Recall(ctx, root, paths, tf, StepOptions{}) },
		// Uploads again onto the objects already there: each is replaced
		// through a temporary name (the filesystem target's putNamed).
		func() ([]Result, error) {
			return Premigrate(ctx, root, paths, target, "t", StepOptions{Overwrite: true})
		},
		func() ([]Result, error) { return Migrate(ctx, root, paths, target, "t", StepOptions{StubSize: 100}) },
		func() ([]Result, error) { return Recall(ctx, root, paths, tf, StepOptions{DeleteOnRecall: true}) },
		func() ([]Result, error) { return Migrate(ctx, root, paths, oneByOne, "t", StepOptions{StubSize: 100}) },
		func() ([]Result, error) { return Recall(ctx, root, paths, tf, StepOptions{DeleteOnRecall: true}) },
	}
	for i, step := range steps {
		res, err := step()
		require.NoError(t, err)
		for _, r := range res {
			require.NotEqual(t, CodeFailed, r.Code, "step %d %s: %s", i, r.Path, r.Message)
		}
	}
	_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
}

// markersOneByOne is a filesystem target that cannot share a body among
// markers (targets.Grouper), so each is created on its own.
type markersOneByOne struct{ *targets.Filesystem }

func (markersOneByOne) NewGroup(context.Context) (targets.Group, error) {
	return nil, errors.ErrUnsupported
}

func faultTree(t *testing.T, dir string) map[string]testFile {
	t.Helper()
	files := map[string]testFile{}
	for p, size := range map[string]int{"/a/small.bin": 5000, "/a/b/large.bin": 300 << 10} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + size)
		}
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, data, 0o644))
		mtime := time.Date(2021, 3, 4, 5, 6, 7, 891, time.UTC)
		require.NoError(t, os.Chtimes(abs, mtime, mtime))
		files[p] = testFile{data: data, mtime: mtime}
	}
	return files
}

// TestFaultChild is the worker process that TestKillAtEveryFaultPoint
// kills; on its own it does nothing.
func TestFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_FAULT_CHILD_ROOT")
	if dir == "" {
		return
	}
	faultScenario(t, dir, os.Getenv("HUB_FAULT_CHILD_TARGET"), os.Getenv("HUB_FAULT_CHILD_INDEX") == "1")
}

// runFaultChild runs the scenario in a child process with the given
// environment and reports whether it was killed.
func runFaultChild(t *testing.T, dir, tdir string, index bool, env ...string) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultChild$", "-test.count=1")
	idx := "0"
	if index {
		idx = "1"
	}
	cmd.Env = append(os.Environ(), append(env, "HUB_FAULT_CHILD_ROOT="+dir, "HUB_FAULT_CHILD_TARGET="+tdir, "HUB_FAULT_CHILD_INDEX="+idx)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	require.NoError(t, err, "%s", out)
	return false
}

// TestKillAtEveryFaultPoint kills a worker at every instant between two
// filesystem operations of every write the steps make (each fault point,
// at each time it is reached), then runs the same steps again as a
// retried activity would. Every time the files come back byte-identical,
// nothing is left on the site or the target, and no copy is lost on the
// way.
func TestKillAtEveryFaultPoint(t *testing.T) {
	t.Parallel()
	for _, index := range []bool{false, true} {
		name := map[bool]string{false: "xattr state", true: "index state"}[index]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A clean run tells which fault points the scenario reaches.
			dir, tdir := t.TempDir(), t.TempDir()
			files := faultTree(t, dir)
			trace := filepath.Join(t.TempDir(), "trace")
			require.False(t, runFaultChild(t, dir, tdir, index, "HUB_FAULT_TRACE="+trace))
			b, err := os.ReadFile(trace)
			require.NoError(t, err)
			points := strings.Fields(string(b))
			for _, want := range []string{"temp.marked@1", "commit.before-rename@1", "commit.renamed@1", "commit.unmarked@1", "upload.ref-added@1",
				"upload.put@1", "put.written@1", "group.written@1", "create.opened@1", "migrate.marked@1", "migrate.truncated@1", "recall.fetched@1", "recall.marked@1",
				"recall.written@1", "recall.record-cleared@1", "collect.copied@1"} {
				require.Contains(t, points, want)
			}
			if !index {
				// A folder is marked before a record is written in it.
				require.Contains(t, points, "marks.marked@1")
			}
			requireClean(t, dir, tdir, files)
			t.Logf("%d fault points reached", len(points))

			for _, point := range points {
				dir, tdir := t.TempDir(), t.TempDir()
				files := faultTree(t, dir)
				require.True(t, runFaultChild(t, dir, tdir, index, "HUB_FAULT_POINT="+point), "killed at %s", point)
				if strings.HasPrefix(point, "recall.") {
					// A recall's download is in none of the users'
					// folders (fsutil.OpenScratch).
					requireNoTemp(t, filepath.Join(dir, "a"))
				}
				// Until the retry, nothing is lost: each file's data is
				// whole locally or on the target.
				requireRecoverable(t, dir, tdir, files, point)
				faultScenario(t, dir, tdir, index)
				requireClean(t, dir, tdir, files)
			}
		})
	}
}

// targetsOwnFile: a filesystem target's own bookkeeping, in its root: the
// collector's lock file and the flush stamp.
func targetsOwnFile(name string) bool {
	return strings.HasPrefix(name, ".hub-lock-") || name == ".hub-flushed"
}

// requireClean: files whole and resident, no temporary file anywhere, the
// target empty once collected (but for its own files: targetsOwnFile).
func requireClean(t *testing.T, dir, tdir string, files map[string]testFile) {
	t.Helper()
	requireFiles(t, dir, files)
	requireNoTemp(t, dir)
	requireNoTemp(t, tdir)
	require.NoError(t, filepath.WalkDir(tdir, func(p string, e os.DirEntry, err error) error {
		require.NoError(t, err)
		if !e.IsDir() && !targetsOwnFile(e.Name()) {
			t.Errorf("left on the target after collection: %s", p)
		}
		return nil
	}))
}

// requireRecoverable checks that each file's bytes exist somewhere: in the
// file itself, or on the target (objects or trash).
func requireRecoverable(t *testing.T, dir, tdir string, files map[string]testFile, point string) {
	t.Helper()
	for p, f := range files {
		local, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		require.NoError(t, err, "%s after a kill at %s", p, point)
		if slices.Equal(local, f.data) {
			continue
		}
		sum := sha(f.data)
		var found bool
		for _, key := range []string{contentKey(sum), trashKey(sum)} {
			if remote, err := os.ReadFile(filepath.Join(tdir, filepath.FromSlash(key))); err == nil && slices.Equal(remote, f.data) {
				found = true
			}
		}
		require.True(t, found, "%s: its data is nowhere after a kill at %s", p, point)
	}
}
