package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestATriggeredPolicyTakesOnlyFilesOfThePoolItMeasures: a trigger
// measures the pool of the site root's filesystem, and a space on a volume
// mounted beneath the root frees nothing there. Its files were selected,
// the pool never fell, and each check migrated another slice of that
// volume, until all of it was (a reviewer's finding). A triggered policy
// now selects only files on the measured filesystem.
func TestATriggeredPolicyTakesOnlyFilesOfThePoolItMeasures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	mountAt(t, "tmpfs", vol, "tmpfs", 0, "size=16m")
	old := time.Now().Add(-100 * 24 * time.Hour)
	for _, p := range []string{"vol/a.bin", "vol/b.bin", "here/c.bin", "here/d.bin"} {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, make([]byte, 1<<20), 0o644))
		require.NoError(t, os.Chtimes(abs, old, old))
	}
	a := &Activities{Root: newRoot(t, dir, false), Site: "west",
		// Always full: the bound is never reached, and every file the
		// policy may take is taken.
		Utilisation: func(context.Context, string) (int64, int64, error) { return 99 << 30, 100 << 30, nil }}
	in := DiscoverInput{JobID: 9, Run: 1, Mode: "policy", Paths: []string{"/vol", "/here"}, BatchSize: 100,
		Policy: &PolicySelect{Triggers: []PolicyTrigger{{Pool: "system", Upper: 80, Lower: 60, Premigrate: 60}},
			States: []string{"resident", "premigrated"}}}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.True(t, out.Fired)
	got := batchedPaths(t, a, in, out)
	require.ElementsMatch(t, []string{"/here/c.bin", "/here/d.bin"}, got[PolicyRuleAction])

	// Without triggers, the policy takes what its conditions select,
	// wherever it is.
	in.JobID, in.Policy = 10, &PolicySelect{States: []string{"resident", "premigrated"}}
	out, err = discover(t, a, in)
	require.NoError(t, err)
	got = batchedPaths(t, a, in, out)
	require.ElementsMatch(t, []string{"/vol/a.bin", "/vol/b.bin", "/here/c.bin", "/here/d.bin"}, got[PolicyRuleAction])
}
