package site

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/targets"
)

func newTestActivities(t *testing.T) *Activities {
	t.Helper()
	a, err := NewActivities("s1", "default", "node1", t.TempDir(), "")
	require.NoError(t, err)
	return a
}

func TestInventorySite(t *testing.T) {
	t.Parallel()
	a := newTestActivities(t)
	for _, f := range []string{"x/1", "x/y/2", "3"} {
		p := filepath.Join(a.Root.Dir(), f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("abc"), 0o644))
	}
	inv, err := a.InventorySite(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(2), inv.Directories, "x and x/y; the .hub folder is not counted")
	require.Equal(t, int64(3), inv.Files)
	require.Equal(t, int64(3), inv.Hydrated)
	require.Len(t, inv.Pools, 1)
	require.True(t, inv.Pools[0].IsDefault)
	require.Equal(t, "node1", inv.Server.Hostname)
	require.NotEmpty(t, inv.Server.Interfaces)
}

func TestSpaceDirs(t *testing.T) {
	t.Parallel()
	a := newTestActivities(t)
	ctx := context.Background()
	in := SpaceDirInput{Mountpoint: "/spaces/p", Mode: "0700"}
	res, err := a.CreateSpaceDir(ctx, in)
	require.NoError(t, err)
	require.Equal(t, SpaceDirCreated, res.Outcome)
	fi, err := os.Stat(filepath.Join(a.Root.Dir(), "spaces", "p"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	res, err = a.CreateSpaceDir(ctx, in)
	require.NoError(t, err)
	require.Equal(t, SpaceDirExisted, res.Outcome)

	require.NoError(t, os.WriteFile(filepath.Join(a.Root.Dir(), "spaces", "p", "f"), []byte("x"), 0o644))
	res, err = a.RemoveSpaceDir(ctx, in)
	require.NoError(t, err)
	require.Equal(t, SpaceDirKept, res.Outcome)
	require.NoError(t, os.Remove(filepath.Join(a.Root.Dir(), "spaces", "p", "f")))
	res, err = a.RemoveSpaceDir(ctx, in)
	require.NoError(t, err)
	require.Equal(t, SpaceDirRemoved, res.Outcome)
	res, err = a.RemoveSpaceDir(ctx, in)
	require.NoError(t, err)
	require.Equal(t, SpaceDirAbsent, res.Outcome)

	// Paths that leave the root, or name it or the hub's folder, are refused for good.
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(a.Root.Dir(), "escape")))
	for _, m := range []string{"/escape/x", "/", "/.hub/x", "/../x", "/.snapshots/lab"} {
		_, err := a.CreateSpaceDir(ctx, SpaceDirInput{Mountpoint: m})
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%s: %v", m, err)
		require.True(t, appErr.NonRetryable(), m)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was created outside the root")
}

func TestRemoveBucketConfig(t *testing.T) {
	t.Parallel()
	a := newTestActivities(t)
	f := filepath.Join(a.ConfigDir, TargetsConfigDir, "b1.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o750))
	require.NoError(t, os.WriteFile(f, []byte("{}"), 0o600))
	res, err := a.RemoveBucketConfig(context.Background(), BucketConfigInput{Bucket: "b1"})
	require.NoError(t, err)
	require.True(t, res.Removed)
	res, err = a.RemoveBucketConfig(context.Background(), BucketConfigInput{Bucket: "b1"})
	require.NoError(t, err)
	require.False(t, res.Removed, "already gone: success")
	_, err = a.RemoveBucketConfig(context.Background(), BucketConfigInput{Bucket: "../settings"})
	require.Error(t, err)
}

func TestListTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: t.TempDir()})
	require.NoError(t, err)
	keys := []string{"a", "b/1", "b/2", "b/c/3", "d.tif", "e.tif", "f/4", "g"}
	for _, k := range keys {
		require.NoError(t, targetsPut(ctx, d, k))
	}
	names := func(l TargetListing) []string {
		var out []string
		for _, e := range l.Directories {
			out = append(out, e.Name+"/")
		}
		for _, e := range l.Files {
			out = append(out, e.Name)
		}
		return out
	}
	l, err := ListTarget(ctx, d, "", 0, "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "b/", "d.tif", "e.tif", "f/", "g"}, names(l))
	require.Empty(t, l.NextMarker)

	l, err = ListTarget(ctx, d, "/b", 0, "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"1", "2", "c/"}, names(l))

	l, err = ListTarget(ctx, d, "*.tif", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{"d.tif", "e.tif"}, names(l))

	l, err = ListTarget(ctx, d, "a", 0, "")
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, names(l), "a path naming an object lists it")

	var all []string
	marker := ""
	for range 20 {
		l, err = ListTarget(ctx, d, "", 1, marker)
		require.NoError(t, err)
		all = append(all, names(l)...)
		if l.NextMarker == "" {
			break
		}
		marker = l.NextMarker
	}
	require.Equal(t, []string{"a", "b/", "d.tif", "e.tif", "f/", "g"}, all, "one entry a page, in key order, each once")

	for _, bad := range []string{"*/x", "../a", "a/[", "b/../../x"} {
		_, err := ListTarget(ctx, d, bad, 0, "")
		require.ErrorIs(t, err, ErrBadListPath, bad)
	}
}

func targetsPut(ctx context.Context, d targets.Driver, key string) error {
	data := []byte("data:" + key)
	return d.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}
