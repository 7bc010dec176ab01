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

// TestJobRowsShowChanges: the jobs list keeps the rows it showed by
// version, and shows every change made since, whoever made it: through
// the models, by a raw UPDATE (another process, a migration) of any
// column, a job deleted, a job added. The version moves by exactly one
// per update (sqlite's trigger does not fire itself).
func TestJobRowsShowChanges(t *testing.T) {
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

		var rows models.JobRows
		page := func() []models.Job {
			t.Helper()
			got, err := rows.Page(ctx, db, models.JobFilter{}, models.Window{Limit: 3})
			require.NoError(t, err)
			var want []models.Job
			require.NoError(t, models.JobsPage(db, &want, models.JobFilter{}, models.Window{Limit: 3}).Scan(ctx))
			require.Equal(t, want, got, "the kept rows are the database's")
			return got
		}
		version := func(id int64) int64 {
			t.Helper()
			var v int64
			require.NoError(t, db.NewSelect().Table("jobs").Column("version").Where("id = ?", id).Scan(ctx, &v))
			return v
		}
		first := page()
		require.Equal(t, []int64{jobs[4].ID, jobs[3].ID, jobs[2].ID}, []int64{first[0].ID, first[1].ID, first[2].ID})
		require.Equal(t, int64(0), version(jobs[4].ID))

		require.NoError(t, models.UpdateJob(ctx, db, jobs[4].ID, models.JobUpdate{State: vocab.JobPaused}))
		require.Equal(t, int64(1), version(jobs[4].ID))
		require.Equal(t, vocab.JobPaused, page()[0].State)

		_, err = db.ExecContext(ctx, "UPDATE jobs SET friendly_name = 'renamed', numfiles = 7 WHERE id = ?", jobs[3].ID)
		require.NoError(t, err)
		require.Equal(t, int64(1), version(jobs[3].ID))
		got := page()
		require.Equal(t, "renamed", got[1].FriendlyName)
		require.Equal(t, int64(7), got[1].NumFiles)

		_, err = db.NewUpdate().Model(&jobs[2]).Set("error = ?", "broke").WherePK().Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, "broke", page()[2].Error)

		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id = ?", jobs[3].ID).Exec(ctx)
		require.NoError(t, err)
		got = page()
		require.Equal(t, []int64{jobs[4].ID, jobs[2].ID, jobs[1].ID}, []int64{got[0].ID, got[1].ID, got[2].ID})

		added := jobs[0]
		added.ID, added.Created = 0, at.Add(time.Hour)
		_, err = db.NewInsert().Model(&added).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, added.ID, page()[0].ID)
	})
}
