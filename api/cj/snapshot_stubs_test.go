package cj_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// TestSnapshotKeepsMigratedFiles: a C+J snapshot of a space holding a
// migrated file keeps it as a stub of its own, with the site's enabled
// targets passed along: once the space's stub is deleted and its content
// collected, the snapshot's stub still recalls. Before, the snapshot held
// an empty placeholder and the data was lost.
func TestSnapshotKeepsMigratedFiles(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		ctx := context.Background()
		tdir := t.TempDir()
		s, err := models.GetSiteByName(ctx, e.DB, cjtest.Site)
		require.NoError(t, err)
		tgt := &models.ExternalTarget{Name: "archive", StorageType: "filesystem", LocalFileRegex: ".*", Enabled: true}
		tgt.MigrationTargetFolder = tdir
		require.NoError(t, models.SaveExternalTarget(ctx, e.DB, tgt, []int64{s.ID}))
		d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
		require.NoError(t, err)
		drivers := func(string) (targets.Driver, error) { return d, nil }

		space, _ := e.Create("spaces", map[string]any{"name": "work"})
		e.WaitStatus(space, models.CJActive)
		root, err := site.NewRoot(e.Root)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(e.Root, "spaces", "work", "m.txt"), []byte("migrated data"), 0o644))
		res, err := site.Migrate(ctx, root, []string{"/spaces/work/m.txt"}, d, "archive", site.StepOptions{})
		require.NoError(t, err)
		require.Equal(t, site.CodeOK, res[0].Code, res[0].Message)

		snap, _ := e.Create("snapshots", map[string]any{"name": "before", "space": "work"})
		e.WaitStatus(snap, models.CJActive)
		_, rec, err := root.Stat("/.snapshots/work/before/m.txt")
		require.NoError(t, err)
		require.NotNil(t, rec, "the snapshot's copy is a stub with a record")
		require.Equal(t, site.Migrated, rec.State)

		require.NoError(t, os.Remove(filepath.Join(e.Root, "spaces", "work", "m.txt")))
		later := func() time.Time { return time.Now().Add(site.DefaultAuditMinAge + time.Hour) }
		audit, err := site.AuditRefs(ctx, root, map[string]targets.Driver{"archive": d}, site.AuditOptions{Now: later, Drop: true})
		require.NoError(t, err)
		require.Len(t, audit.Leaked, 1, "the deleted stub's reference, not the snapshot's: %+v", audit)
		for range 2 {
			_, err := site.Collect(ctx, d, site.CollectOptions{Grace: time.Nanosecond})
			require.NoError(t, err)
		}
		res, err = site.Recall(ctx, root, []string{"/.snapshots/work/before/m.txt"}, drivers, site.StepOptions{})
		require.NoError(t, err)
		require.Equal(t, site.CodeOK, res[0].Code, res[0].Message)
		got, err := os.ReadFile(filepath.Join(e.Root, ".snapshots", "work", "before", "m.txt"))
		require.NoError(t, err)
		require.Equal(t, "migrated data", string(got))

		// Removed, the snapshot drops its own references: none is left
		// for an audit.
		r := e.Do(http.MethodGet, snap, e.Admin, nil)
		r = e.Do(http.MethodDelete, snap, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		e.WaitGone(snap)
		audit, err = site.AuditRefs(ctx, root, map[string]targets.Driver{"archive": d}, site.AuditOptions{Now: later})
		require.NoError(t, err)
		require.Zero(t, audit.Ours, "%+v", audit)
		apitest.RecordHistories(t, e.Temporal)
	})
}
