package site

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestKillDeleting: a delete of stubs with their remote copies
// (DeleteRemote) is killed at each of its fault points, each time it is
// reached (the tree moved to the site trash; the files and records
// removed, the references not yet dropped), then run again as a retried
// activity would. The paths are gone; a stub killed in the trash still
// recalls from its remote copy; and once the operator purges the trash
// and the audit drops what no record names, a collection empties the
// target: a kill keeps copies longer, never loses one a stub needs, and
// leaves nothing for good.
func TestKillDeleting(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			for _, point := range []string{"delete.moved-aside@1", "delete.moved-aside@2", "delete.removed@1", "delete.removed@2"} {
				ctx := context.Background()
				dir, tdir := t.TempDir(), t.TempDir()
				files := faultTree(t, dir)
				root := newRoot(t, dir, index)
				target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
				require.NoError(t, err)
				paths := []string{"/a/small.bin", "/a/b/large.bin"}
				res, err := Migrate(ctx, root, paths, target, "t", StepOptions{StubSize: 100})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, paths)

				require.True(t, runChild(t, "^TestKillDeletingChild$", "HUB_DELETE_CHILD_ROOT="+dir,
					"HUB_DELETE_CHILD_TARGET="+tdir, "HUB_DELETE_CHILD_INDEX="+idx, "HUB_FAULT_POINT="+point), "killed at %s", point)
				root = newRoot(t, dir, index)
				trashed, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(trashFolder), "*"))
				require.NoError(t, err)
				// A stub set aside in the trash still has its data: an
				// operator restores it (with its records) and recalls it.
				for _, entry := range trashed { // each a deleted file, set aside under a name of its own
					restored := "/restored/" + filepath.Base(entry)
					require.NoError(t, root.RestoreFromTrash(context.Background(), filepath.Base(entry), restored))
					res, err := Recall(ctx, root, []string{restored}, only("t", target), StepOptions{})
					require.NoError(t, err)
					requireAll(t, res, CodeOK, []string{restored})
					got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(restored)))
					require.NoError(t, err)
					require.True(t, slices.ContainsFunc(slices.Collect(maps.Values(files)), func(f testFile) bool { return bytes.Equal(f.data, got) }),
						"%s recalled from the trash after a kill at %s is none of the files deleted", restored, point)
				}

				res, err = Delete(ctx, root, paths, only("t", target), StepOptions{DeleteRemote: true})
				require.NoError(t, err)
				for _, r := range res {
					require.NotEqual(t, CodeFailed, r.Code, "%s, run again after a kill at %s: %s", r.Path, point, r.Message)
					require.NoFileExists(t, filepath.Join(dir, filepath.FromSlash(r.Path)))
				}
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "restored"))) // the operator is done with them
				later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
				_, err = AuditRefs(ctx, root, map[string]targets.Driver{"t": target}, AuditOptions{Now: later, Drop: true})
				require.NoError(t, err)
				for range 2 {
					_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
					require.NoError(t, err)
				}
				requireNoTemp(t, dir)
				require.NoError(t, filepath.WalkDir(tdir, func(p string, e os.DirEntry, err error) error {
					require.NoError(t, err)
					if !e.IsDir() && !targetsOwnFile(e.Name()) {
						t.Errorf("left on the target after a kill at %s, the delete run again, the trash purged and the references audited: %s", point, p)
					}
					return nil
				}))
			}
		})
	}
}

// TestKillDeletingChild is the worker TestKillDeleting kills; on its own
// it does nothing.
func TestKillDeletingChild(t *testing.T) {
	dir := os.Getenv("HUB_DELETE_CHILD_ROOT")
	if dir == "" {
		return
	}
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: os.Getenv("HUB_DELETE_CHILD_TARGET")})
	require.NoError(t, err)
	root := newRoot(t, dir, os.Getenv("HUB_DELETE_CHILD_INDEX") == "1")
	_, err = Delete(context.Background(), root, []string{"/a/small.bin", "/a/b/large.bin"}, only("t", target), StepOptions{DeleteRemote: true})
	require.NoError(t, err)
}

// TestDeleteTwoNamesOfOneFile: a delete's trash entries are named by the
// file's identity and path; two names of one file (hard links) deleted in
// one step are both removed. (Their entries would collide only if both
// were in the trash at once, which this test does not force.)
func TestDeleteTwoNamesOfOneFile(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"/a.txt": "one file, two names"})
			require.NoError(t, os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")))
			root := newRoot(t, dir, index)
			paths := []string{"/a.txt", "/b.txt"}
			res, err := Delete(context.Background(), root, paths, only("t", fsTarget(t)), StepOptions{DeleteRemote: true})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			for _, p := range paths {
				require.NoFileExists(t, filepath.Join(dir, p))
			}
		})
	}
}
