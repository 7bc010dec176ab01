package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// deleteJob discovers paths as a job would (mode, the globs) with a single
// rule of type "all" (a user-defined workflow's default, which takes the
// folders a recursive discovery finds), then runs a delete step (with
// remote copies released when remote) over every batch with the same
// globs, as the job workflow passes them. It returns each path's outcome.
func deleteJob(t *testing.T, a *Activities, tdir, mode string, paths, include, exclude []string, remote bool) map[string]Outcome {
	t.Helper()
	in := DiscoverInput{JobID: 3, Run: 1, Mode: mode, Paths: paths, Include: include, Exclude: exclude,
		Rules: []RuleFilter{{Type: "all", State: "any"}}}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	got := map[string]Outcome{}
	for _, b := range out.Batches {
		var res StepOutput
		require.NoError(t, runActivity(a, a.RunStep, StepInput{JobID: 3, Run: 1, Batch: b.Index, BatchAttempt: b.Attempt,
			Name: "delete", Params: map[string]any{"remote": remote}, Targets: []TargetSpec{spec},
			Include: include, Exclude: exclude}, &res))
		for _, o := range res.Outcomes {
			got[o.Path] = o
		}
	}
	return got
}

// requireTrashEmpty: nothing a delete set aside is left in the site trash.
func requireTrashEmpty(t *testing.T, dir string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(trashFolder), "*"))
	require.NoError(t, err)
	require.Empty(t, left, "left in the site trash")
}

// TestADeleteNeverRemovesWhatTheGlobsKeepOut: a user-defined workflow's
// rule is of type "all" by default, so a recursive discovery hands the
// folders it walks to the rule's steps too, and a delete removed each
// folder whole: with the files the site's or the job's exclude globs keep
// out of every job (a reviewer's finding: data loss). Now a folder that
// holds a path the globs keep out is not deleted (its path fails, saying
// why), nothing is left in the site trash, and the files the job selected
// in it are deleted by their own entries; with and without remote, on
// both state backends.
func TestADeleteNeverRemovesWhatTheGlobsKeepOut(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		for _, remote := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: ", remote"}[remote], func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				writeFiles(t, dir, map[string]string{"/data/sub/a.txt": "selected", "/data/sub/b.keep": "excluded"})
				a := &Activities{Root: newRoot(t, dir, index), Site: "s"}
				got := deleteJob(t, a, t.TempDir(), "recursive", []string{"/data"}, nil, []string{"**/*.keep"}, remote)

				require.FileExists(t, filepath.Join(dir, "data", "sub", "b.keep"), "a file the job's excludes keep out was deleted")
				require.NoFileExists(t, filepath.Join(dir, "data", "sub", "a.txt"), "the file the job selected is deleted by its own entry")
				for _, p := range []string{"/data", "/data/sub"} {
					require.Equal(t, OutcomeFailure, got[p].State, "%s: %+v", p, got[p])
					require.Contains(t, got[p].Message, "not deleted: it holds 1 path the job's exclude globs keep out of the job, e.g. /data/sub/b.keep")
				}
				require.Equal(t, OutcomeSuccess, got["/data/sub/a.txt"].State, "%+v", got["/data/sub/a.txt"])
				requireTrashEmpty(t, dir)
				requireNoTemp(t, dir)
			})
		}
	}
}

// TestADeleteTakesAFolderItsIncludesChoseWhole: an include glob that
// selects folders (a cleanup of `**/cache`) chooses them with what they
// hold; the first mend counted what in them only missed the include as
// kept out, and refused every such folder (a reviewer's finding). Only
// the excludes keep a path out.
func TestADeleteTakesAFolderItsIncludesChoseWhole(t *testing.T) {
	t.Parallel()
	for _, remote := range []bool{false, true} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"/proj/a/cache/x.bin": "cached", "/proj/a/cache/sub/y.bin": "cached",
			"/proj/a/keep.txt": "not chosen"})
		a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
		got := deleteJob(t, a, t.TempDir(), "recursive", []string{"/proj"}, []string{"**/cache"}, nil, remote)

		require.NoDirExists(t, filepath.Join(dir, "proj", "a", "cache"))
		require.FileExists(t, filepath.Join(dir, "proj", "a", "keep.txt"))
		require.Equal(t, OutcomeSuccess, got["/proj/a/cache"].State, "%+v", got["/proj/a/cache"])
		requireTrashEmpty(t, dir)
	}
}

// TestAnExactPathDeleteKeepsWhatTheGlobsKeepOut: the discovery of exact
// paths (a resubmit's failed paths, a job without discovery) hands a
// folder given as it is, unwalked: its delete checks the folder too, and
// a path the globs themselves keep out is not deleted (a reviewer's
// finding). A folder holding nothing they keep out still goes.
func TestAnExactPathDeleteKeepsWhatTheGlobsKeepOut(t *testing.T) {
	t.Parallel()
	for _, remote := range []bool{false, true} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"/data/sub/a.txt": "a", "/data/sub/b.keep": "excluded", "/data/x.keep": "excluded",
			"/data/other/c.txt": "c"})
		a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
		got := deleteJob(t, a, t.TempDir(), "", []string{"/data/sub", "/data/x.keep", "/data/other"}, nil, []string{"**/*.keep"}, remote)

		require.FileExists(t, filepath.Join(dir, "data", "sub", "b.keep"))
		require.FileExists(t, filepath.Join(dir, "data", "sub", "a.txt"), "not listed, so not deleted")
		require.FileExists(t, filepath.Join(dir, "data", "x.keep"))
		require.NoDirExists(t, filepath.Join(dir, "data", "other"), "nothing in it is kept out")
		require.Equal(t, OutcomeFailure, got["/data/sub"].State)
		require.Contains(t, got["/data/sub"].Message, "e.g. /data/sub/b.keep")
		require.Equal(t, OutcomeFailure, got["/data/x.keep"].State)
		require.Contains(t, got["/data/x.keep"].Message, "globs keep it out of the job")
		require.Equal(t, OutcomeSuccess, got["/data/other"].State, "%+v", got["/data/other"])
		requireTrashEmpty(t, dir)
	}
}

// TestAKilledDeleteKeepsWhatTheGlobsKeepOut: a delete with remote copies
// released moves a folder aside into the site trash and checks it there
// (where no user adds a file meanwhile); one that holds a path the globs
// keep out goes back. A worker killed after the move, or while it puts
// the folder back, leaves it in the trash: the rerun, finding the path
// gone, puts it back and fails the path, so the excluded file is neither
// lost nor left in the trash for a purge (a reviewer's finding). The
// folder here gets its excluded file between the delete's first check
// and the move (the child writes it), as a user's save would; not
// killed, the delete puts it back at once.
func TestAKilledDeleteKeepsWhatTheGlobsKeepOut(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			for _, point := range []string{"", "delete.moved-aside@1", "delete.putting-back@1"} {
				ctx := context.Background()
				dir, tdir := t.TempDir(), t.TempDir()
				writeFiles(t, dir, map[string]string{"/data/sub/a.bin": strings.Repeat("a stub's data ", 100)})
				root := newRoot(t, dir, index)
				target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
				require.NoError(t, err)
				res, err := Migrate(ctx, root, []string{"/data/sub/a.bin"}, target, "t", StepOptions{StubSize: 10})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, []string{"/data/sub/a.bin"})

				killed := runChild(t, "^TestAKilledDeleteKeepsWhatTheGlobsKeepOutChild$", "HUB_DELETE_GLOBS_ROOT="+dir,
					"HUB_DELETE_GLOBS_TARGET="+tdir, "HUB_DELETE_GLOBS_INDEX="+idx, "HUB_FAULT_POINT="+point)
				require.Equal(t, point != "", killed, "killed at %q", point)
				if point == "" {
					// Not killed: the folder, checked again once aside,
					// went back at once.
					require.FileExists(t, filepath.Join(dir, "data", "sub", "b.keep"))
					requireTrashEmpty(t, dir)
				} else {
					require.NoDirExists(t, filepath.Join(dir, "data", "sub"), "killed at %s: the folder is aside", point)
				}

				root = newRoot(t, dir, index)
				opts := StepOptions{DeleteRemote: true, Exclude: []string{"**/*.keep"}}
				res, err = Delete(ctx, root, []string{"/data/sub"}, only("t", target), opts)
				require.NoError(t, err)
				if point == "" {
					require.Equal(t, CodeFailed, res[0].Code, res[0].Message)
					require.Contains(t, res[0].Message, "e.g. /data/sub/b.keep")
				} else {
					// Killed in the instant between the move aside and the
					// put back, after a user's save in the instant before
					// the move: the entry stays in the site trash with its
					// records and references, as any killed delete's, for
					// an operator (hub site restore-space); the rerun does
					// not search the trash (docs/jobs.md, delete).
					require.Equal(t, CodeSkipped, res[0].Code, res[0].Message)
					entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(trashFolder)))
					require.NoError(t, err)
					require.Len(t, entries, 1)
					require.NoError(t, root.RestoreFromTrash(ctx, entries[0].Name(), "/data/sub"))
				}
				require.FileExists(t, filepath.Join(dir, "data", "sub", "b.keep"), "killed at %s", point)
				requireTrashEmpty(t, dir)
				requireNoTemp(t, dir)
				// The stub came back with its record: it recalls.
				res, err = Recall(ctx, root, []string{"/data/sub/a.bin"}, only("t", target), StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, []string{"/data/sub/a.bin"})
			}
		})
	}
}

// TestAKilledDeleteKeepsWhatTheGlobsKeepOutChild is the worker
// TestAKilledDeleteKeepsWhatTheGlobsKeepOut kills; on its own it does
// nothing.
func TestAKilledDeleteKeepsWhatTheGlobsKeepOutChild(t *testing.T) {
	dir := os.Getenv("HUB_DELETE_GLOBS_ROOT")
	if dir == "" {
		return
	}
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: os.Getenv("HUB_DELETE_GLOBS_TARGET")})
	require.NoError(t, err)
	root := newRoot(t, dir, os.Getenv("HUB_DELETE_GLOBS_INDEX") == "1")
	// A user saves an excluded file once the delete checked the folder,
	// before it moves it aside.
	moveLocking = func(string) {
		_ = os.WriteFile(filepath.Join(dir, "data", "sub", "b.keep"), []byte("excluded"), 0o644)
	}
	res, err := Delete(context.Background(), root, []string{"/data/sub"}, only("t", target),
		StepOptions{DeleteRemote: true, Exclude: []string{"**/*.keep"}})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code, res[0].Message)
	require.Contains(t, res[0].Message, "e.g. /data/sub/b.keep")
}
