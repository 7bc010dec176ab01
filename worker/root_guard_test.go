package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/thehub/hub/activities/site"
)

// TestSiteActivitiesRefuseAMovedRoot: once the root's path leads to
// another folder than the worker opened (its volume unmounted lazily, an
// empty mountpoint left, or another volume mounted over it), a site
// activity is refused and writes nothing there; once the path leads back,
// activities run again.
func TestSiteActivitiesRefuseAMovedRoot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "site")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".hub"), 0o755))
	root, err := site.NewRoot(dir)
	require.NoError(t, err)

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(siteOptions(root, 0))
	write := func(ctx context.Context, name string) error {
		return os.WriteFile(filepath.Join(root.Dir(), name), []byte("x"), 0o644)
	}
	env.RegisterActivity(write)

	_, err = env.ExecuteActivity(write, "before")
	require.NoError(t, err)

	// The volume goes; an empty mountpoint is left at the path.
	require.NoError(t, os.Rename(dir, filepath.Join(parent, "away")))
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err = env.ExecuteActivity(write, "during")
	require.ErrorContains(t, err, site.ErrRootMoved.Error())
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, names, "nothing is written on the empty mountpoint")

	// The volume comes back.
	require.NoError(t, os.Remove(dir))
	require.NoError(t, os.Rename(filepath.Join(parent, "away"), dir))
	_, err = env.ExecuteActivity(write, "after")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "after"))
}
