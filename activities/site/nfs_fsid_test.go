package site

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// TestExportFSIDsAreUnique: two exports of different folders with one
// fsid look like one filesystem to the NFS server, and the file handles
// of one reach the other's files. An export naming an fsid another export
// of the site (hub share or C+J exposer) uses for another folder is
// refused for good, its old definition removed; the same folder may keep
// its fsid, and the export may be written again.
func TestExportFSIDsAreUnique(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	for _, s := range []string{"s1", "s2"} {
		_, err := a.CJApply(ctx, CJChange{Type: CJSpaces, Name: s, Space: &CJSpace{Name: s}})
		require.NoError(t, err)
	}
	exposer := func(name, space, opts string) error {
		_, err := a.CJApply(ctx, CJChange{Type: CJExposers, Name: name, Exposer: &CJExposer{Name: name, Kind: CJNFS, Space: space, Options: opts}})
		return err
	}
	require.NoError(t, exposer("e1", "s1", "rw,fsid=7"))
	require.NoError(t, exposer("e1", "s1", "ro,fsid=7"), "written again")
	require.NoError(t, exposer("e3", "s1", "rw,fsid=7"), "the same folder")

	err := exposer("e2", "s2", "rw,sync,fsid=7")
	require.ErrorIs(t, err, errFSIDInUse)
	require.ErrorContains(t, err, "fsid=7 is already set by exports.d/e")
	require.NoFileExists(t, filepath.Join(a.ConfigDir, cjExportsDir, "e2.exports"))
	require.NoError(t, exposer("e2", "s2", "rw,fsid=8"))

	share := ShareConfig{Kind: ShareNFS, ID: 1, Path: "/spaces/s2", NFSClients: []NFSExportClient{{Hosts: "*", Options: "ro,fsid=7"}}}
	_, err = a.WriteShare(ctx, share)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae) && ae.NonRetryable(), "%v", err)
	require.ErrorContains(t, err, "fsid=7 is already set by exports.d/e")
	share.NFSClients[0].Options = "ro,fsid=8"
	_, err = a.WriteShare(ctx, share)
	require.NoError(t, err, "s2's fsid, for s2")
	b, err := os.ReadFile(filepath.Join(a.ConfigDir, sharesDir, "nfs-1.exports"))
	require.NoError(t, err)
	require.Contains(t, string(b), "fsid=8")
}

func TestExportFSIDsParsing(t *testing.T) {
	t.Parallel()
	got := exportFSIDs("# fsid=1 in a comment\n" +
		`"/a b/fsid=2(x)" host(rw,fsid=3) other(ro,fsid=3)` + "\n" +
		"/plain *(fsid=4,rw)\n" +
		`"/no-fsid" *(rw)` + "\n")
	require.Equal(t, map[string]string{"3": "/a b/fsid=2(x)", "4": "/plain"}, got)
}
