package site

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpaceRemovalChild is the worker process TestKillRemovingASpace
// kills; on its own it does nothing.
func TestSpaceRemovalChild(t *testing.T) {
	dir := os.Getenv("HUB_SPACE_CHILD_ROOT")
	if dir == "" {
		return
	}
	a, err := NewActivities("s", "default", "n", dir, "")
	require.NoError(t, err)
	_, err = a.CJApply(context.Background(), CJChange{Type: CJSpaces, Name: "s", Space: &CJSpace{Name: "s"}, Delete: true})
	require.NoError(t, err)
}

// TestKillRemovingASpace kills the worker at every fault point of a C+J
// space removal that moves the space's data to the site's trash, then
// retries the removal: the data is whole in the space or in the trash at
// every instant, never in both or neither, and the retry finishes the
// removal (the quota of a folder killed away at cj.space.removed too).
func TestKillRemovingASpace(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "root")
		a, err := NewActivities("s", "default", "n", dir, "")
		require.NoError(t, err)
		quota := int64(5)
		_, err = a.CJApply(context.Background(), CJChange{Type: CJSpaces, Name: "s", Space: &CJSpace{Name: "s", Quota: &quota}})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(a.Root.Dir(), cjSpacesDir, "s", "data.bin"), []byte("precious"), 0o644))
		return a.Root.Dir()
	}
	run := func(t *testing.T, dir string, env ...string) (killed bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpaceRemovalChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), append(env, "HUB_SPACE_CHILD_ROOT="+dir)...)
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
	// copies lists where data.bin is, in the space or in the trash.
	copies := func(t *testing.T, dir string) []string {
		var found []string
		require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			require.NoError(t, err)
			if d.Name() == "data.bin" {
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				require.Equal(t, "precious", string(b), p)
				found = append(found, strings.TrimPrefix(p, dir))
			}
			return nil
		}))
		return found
	}

	dir := setup(t)
	trace := filepath.Join(t.TempDir(), "trace")
	require.False(t, run(t, dir, "HUB_FAULT_TRACE="+trace))
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(b))
	require.Contains(t, points, "trash.before-rename@1")
	require.Contains(t, points, "trash.renamed@1")
	require.Contains(t, points, "cj.space.removed@1") // the folder gone, its quota not yet
	require.Len(t, copies(t, dir), 1)
	require.NoDirExists(t, filepath.Join(dir, cjSpacesDir, "s"))

	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			dir := setup(t)
			require.True(t, run(t, dir, "HUB_FAULT_POINT="+point), "killed at %s", point)
			require.Len(t, copies(t, dir), 1, "the data is whole in one place after a kill at %s", point)
			require.False(t, run(t, dir), "the retry")
			got := copies(t, dir)
			require.Len(t, got, 1)
			require.True(t, strings.HasPrefix(got[0], "/"+trashFolder+"/s-"), got[0])
			require.NoDirExists(t, filepath.Join(dir, cjSpacesDir, "s"))
			require.NoFileExists(t, filepath.Join(dir, hubDir, "config", cjQuotasDir, "s.quota"))
		})
	}
}
