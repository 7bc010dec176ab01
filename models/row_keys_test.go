package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobKeys: a window's keys are the ids of the jobs the list shows
// there, in its order (also read from the list's end), and a job's
// version moves by exactly one at every update of its row, whoever makes
// it (sqlite's trigger does not fire itself). The jobs list's use of them
// is TestJobsListShowsEveryChange.
func TestJobKeys(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		at := time.Now().UTC().Truncate(time.Second)
		jobs := make([]models.Job, 5)
		for i := range jobs {
			jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
				State: vocab.JobSuccess, Created: at.Add(time.Duration(i) * time.Second), Updated: at, Run: 1,
				OwnerType: models.OwnerSystem, OwnerName: "System", Fields: map[string]any{}, Paths: []string{"/data"}}
		}
		_, err = db.NewInsert().Model(&jobs).Exec(ctx)
		require.NoError(t, err)
		var all []models.Job // newest first
		require.NoError(t, models.JobsQuery(db, &all, models.JobFilter{}).Scan(ctx))
		for _, c := range []struct {
			w    models.Window
			want []models.Job
		}{{models.Window{Limit: 3}, all[:3]}, {models.Window{Limit: 2, Offset: 1, FromEnd: true}, all[2:4]}} {
			keys, err := models.JobKeys(ctx, db, models.JobFilter{}, c.w)
			require.NoError(t, err)
			require.Len(t, keys, len(c.want))
			for i := range c.want {
				require.Equal(t, c.want[i].ID, keys[i].ID, "%+v", c.w)
			}
		}
		version := func(id int64) int64 {
			t.Helper()
			got, err := models.JobsByID(ctx, db, []int64{id})
			require.NoError(t, err)
			keys, err := models.JobKeys(ctx, db, models.JobFilter{}, models.Window{Limit: 5})
			require.NoError(t, err)
			for _, k := range keys {
				if k.ID == id {
					require.Equal(t, k.Version, got[0].Version, "JobsByID reads the version")
				}
			}
			return got[0].Version
		}
		require.Equal(t, int64(0), version(jobs[4].ID))
		require.NoError(t, models.UpdateJob(ctx, db, jobs[4].ID, models.JobUpdate{State: vocab.JobPaused}))
		require.Equal(t, int64(1), version(jobs[4].ID))
		_, err = db.ExecContext(ctx, "UPDATE jobs SET friendly_name = 'renamed', numfiles = 7 WHERE id = ?", jobs[3].ID)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, "UPDATE jobs SET numfiles = 8 WHERE id = ?", jobs[3].ID)
		require.NoError(t, err)
		require.Equal(t, int64(2), version(jobs[3].ID))
	})
}
