package site

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// snapshotChildAt is the firing time the child process snapshots at; the
// snapshot taken 8 days before it has expired (retention 7 days).
var snapshotChildAt = time.Date(2026, 11, 23, 2, 30, 0, 0, time.UTC)

// TestSnapshotChild is the process TestKillTakingASnapshot kills: one
// firing of a space's snapshot schedule.
func TestSnapshotChild(t *testing.T) {
	dir := os.Getenv("HUB_SNAPSHOT_CHILD_ROOT")
	if dir == "" {
		return // run on its own: nothing to do
	}
	a, err := NewActivities("s", "default", "n", dir, "")
	require.NoError(t, err)
	_, err = a.TakeSpaceSnapshot(context.Background(), SpaceSnapshotInput{Space: "lab", Folder: "/spaces/lab",
		At: snapshotChildAt, KeepFor: 7 * 24 * time.Hour})
	require.NoError(t, err)
}

// TestKillTakingASnapshot kills a snapshot firing at every fault point of
// its writes (the copy placed, the expired snapshot moved to the trash),
// runs it again, and finds exactly the new snapshot, whole, the expired
// one gone, and nothing left in the build folder or the trash.
func TestKillTakingASnapshot(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "root")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "spaces", "lab"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "spaces", "lab", "data.bin"), []byte("precious"), 0o644))
		old := filepath.Join(dir, cjSnapshotsDir, "lab", ScheduledSnapshotName(snapshotChildAt.Add(-8*24*time.Hour)))
		require.NoError(t, os.MkdirAll(old, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(old, "data.bin"), []byte("old"), 0o644))
		return dir
	}
	run := func(t *testing.T, dir string, env ...string) (killed bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), append(env, "HUB_SNAPSHOT_CHILD_ROOT="+dir)...)
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
	// state lists every file below the root but the site's own records
	// (and its moves lock), with its content.
	state := func(t *testing.T, dir string) []string {
		var got []string
		require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			require.NoError(t, err)
			rel, _ := filepath.Rel(dir, p)
			if d.IsDir() || strings.HasPrefix(rel, ".hub/record") || strings.HasPrefix(rel, ".hub/state") || rel == ".hub/"+movesLockFile || strings.HasPrefix(rel, ".hub/"+folderMarksDir) {
				return nil
			}
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			got = append(got, rel+"="+string(b))
			return nil
		}))
		sort.Strings(got)
		return got
	}
	want := []string{
		filepath.Join(cjSnapshotsDir, "lab", ScheduledSnapshotName(snapshotChildAt), "data.bin") + "=precious",
		"spaces/lab/data.bin=precious",
	}

	dir := setup(t)
	trace := filepath.Join(t.TempDir(), "trace")
	require.False(t, run(t, dir, "HUB_FAULT_TRACE="+trace))
	require.Equal(t, want, state(t, dir))
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(b))
	for _, p := range []string{"snapshot.copied@1", "snapshot.placed@1", "trash.before-rename@1", "trash.renamed@1"} {
		require.Contains(t, points, p)
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			dir := setup(t)
			require.True(t, run(t, dir, "HUB_FAULT_POINT="+point), "killed at %s", point)
			require.False(t, run(t, dir), "the retry")
			require.Equal(t, want, state(t, dir), "after a kill at %s and a retry", point)
		})
	}
}
