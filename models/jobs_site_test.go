package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobsOfASite: the jobs list filtered by a site name (the site called
// so now, by id, or when the job was created, by the name it keeps; with
// the site looked up by ResolveSite and without) and by a site id counts
// the jobs job_site_counts keeps and pages the two indexes merged, and both agree with a plain scan of the jobs, through
// inserts of one and of many jobs, a rename and a new site taking the old
// name, jobs whose site is rewritten in the database, deletes, and a
// site's deletion removing its jobs.
func TestJobsOfASite(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		east, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		west, err := models.EnsureSite(ctx, db, "west")
		require.NoError(t, err)
		base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		insert := func(n int, site *models.Site, from int) {
			jobs := make([]models.Job, n)
			for i := range jobs {
				// Three jobs a second: ties in created, told apart by id.
				at := base.Add(time.Duration((from+i)/3) * time.Second)
				jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
					State: models.JobStates[i%3], Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, OwnerName: "System",
					Fields: map[string]any{}, Paths: []string{"/data"}}
			}
			_, err := db.NewInsert().Model(&jobs).Exec(ctx)
			require.NoError(t, err)
		}
		// want is the ids of the jobs of the site called name (now or
		// when created), in the list's order, as a scan finds them.
		want := func(name, state string) []int64 {
			q := db.NewSelect().TableExpr("jobs AS j").Column("j.id").
				Where("(j.site_id IN (SELECT s.id FROM sites AS s WHERE s.name = ?) OR j.site = ?)", name, name).
				OrderExpr("j.created DESC, j.id DESC")
			if state != "" {
				q.Where("j.state = ?", state)
			}
			var ids []int64
			require.NoError(t, q.Scan(ctx, &ids))
			return ids
		}
		windows := []models.Window{{Limit: 10}, {Limit: 7, Offset: 13}, {Limit: 10, Offset: 5, FromEnd: true},
			{Limit: 4, Offset: 1000}, {Limit: 1000}, {Limit: 1000, FromEnd: true}}
		check := func(step string) {
			t.Helper()
			for _, name := range []string{"east", "west", "north", "nowhere"} {
				for _, state := range []string{"", models.JobStates[1]} {
					all := want(name, state)
					f := models.JobFilter{Site: name}
					if state != "" {
						f.States = []string{state}
					}
					resolved := f
					require.NoError(t, resolved.ResolveSite(ctx, db))
					for _, f := range []models.JobFilter{f, resolved} {
						n, err := models.CountJobs(ctx, db, f)
						require.NoError(t, err)
						require.Equal(t, len(all), n, "%s: count of %s %s", step, name, state)
						for _, w := range windows {
							end := min(w.Offset+w.Limit, len(all))
							start := min(w.Offset, len(all))
							if w.FromEnd {
								start, end = max(len(all)-w.Offset-w.Limit, 0), max(len(all)-w.Offset, 0)
							}
							keys, err := models.JobKeys(ctx, db, f, w)
							require.NoError(t, err)
							ids := []int64{}
							for _, k := range keys {
								ids = append(ids, k.ID)
							}
							require.Equal(t, append([]int64{}, all[start:end]...), ids, "%s: page %+v of %s %s", step, w, name, state)
						}
					}
				}
			}
			var sites []models.Site
			require.NoError(t, db.NewSelect().Model(&sites).Scan(ctx))
			for _, s := range sites {
				real, err := db.NewSelect().TableExpr("jobs").Where("site_id = ?", s.ID).Count(ctx)
				require.NoError(t, err)
				n, err := models.CountJobs(ctx, db, models.JobFilter{SiteID: &s.ID})
				require.NoError(t, err)
				require.Equal(t, int(real), n, "%s: count of site id %d", step, s.ID)
				real, err = db.NewSelect().TableExpr("jobs AS j").Where("j.site_id = ?", s.ID).
					Where("(j.site_id IN (SELECT s.id FROM sites AS s WHERE s.name = ?) OR j.site = ?)", "east", "east").Count(ctx)
				require.NoError(t, err)
				n, err = models.CountJobs(ctx, db, models.JobFilter{SiteID: &s.ID, Site: "east"})
				require.NoError(t, err)
				require.Equal(t, int(real), n, "%s: count of site id %d named east", step, s.ID)
			}
		}
		check("empty")
		insert(120, east, 0)
		insert(80, west, 60)
		insert(1, east, 500)
		check("inserted")

		_, err = db.NewUpdate().Table("sites").Set("name = 'north'").Where("id = ?", east.ID).Exec(ctx)
		require.NoError(t, err)
		newEast, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		insert(40, newEast, 30)
		check("renamed, the name taken again")

		// Rewritten in the database: the name kept, the id, both.
		_, err = db.NewUpdate().Table("jobs").Set("site = 'west'").Where("id % 7 = 0").Exec(ctx)
		require.NoError(t, err)
		_, err = db.NewUpdate().Table("jobs").Set("site_id = ?", west.ID).Where("id % 11 = 0").Exec(ctx)
		require.NoError(t, err)
		_, err = db.NewUpdate().Table("jobs").Set("site_id = ?, site = 'elsewhere'", newEast.ID).Where("id % 13 = 0").Exec(ctx)
		require.NoError(t, err)
		_, err = db.NewUpdate().Table("jobs").Set("site = site, state = ?", models.JobStates[1]).Where("id % 5 = 0").Exec(ctx)
		require.NoError(t, err)
		check("rewritten")

		_, err = db.NewDelete().TableExpr("jobs").Where("id % 4 = 1").Exec(ctx)
		require.NoError(t, err)
		check("deleted")
		_, err = db.NewDelete().TableExpr("sites").Where("id = ?", west.ID).Exec(ctx)
		require.NoError(t, err)
		check("site deleted")
	})
}

// TestJobSiteCountsUnderConcurrentWriters: jobs of two sites inserted,
// moved between the sites and deleted by eight writers at once leave
// job_site_counts equal to what the jobs table holds, and no writer
// fails (PostgreSQL's triggers take the jobs' count row first, so two
// writers never wait for each other's pairs the other way round).
func TestJobSiteCountsUnderConcurrentWriters(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		var sites []*models.Site
		for _, name := range []string{"east", "west"} {
			s, err := models.EnsureSite(ctx, db, name)
			require.NoError(t, err)
			sites = append(sites, s)
		}
		at := time.Now().UTC()
		var g errgroup.Group
		for w := range 8 {
			g.Go(func() error {
				for i := range 10 {
					mine, other := sites[(w+i)%2], sites[(w+i+1)%2]
					jobs := make([]models.Job, 1+i%3)
					for k := range jobs {
						jobs[k] = models.Job{Workflow: "premigrate", Site: mine.Name, SiteID: mine.ID, Queue: vocab.DefaultQueue,
							State: vocab.JobSuccess, Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, OwnerName: "System",
							Fields: map[string]any{}, Paths: []string{"/data"}}
					}
					err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
						if _, err := tx.NewInsert().Model(&jobs).Exec(ctx); err != nil {
							return err
						}
						if _, err := tx.NewUpdate().TableExpr("jobs").Set("site_id = ?, site = ?", other.ID, other.Name).
							Where("id = ?", jobs[0].ID).Exec(ctx); err != nil {
							return err
						}
						if i%2 == 1 {
							_, err := tx.NewDelete().TableExpr("jobs").Where("id = ?", jobs[len(jobs)-1].ID).Exec(ctx)
							return err
						}
						return nil
					})
					if err != nil {
						return err
					}
				}
				return nil
			})
		}
		require.NoError(t, g.Wait())
		for _, s := range sites {
			real, err := db.NewSelect().TableExpr("jobs").Where("site_id = ?", s.ID).Count(ctx)
			require.NoError(t, err)
			require.NotZero(t, real)
			for _, f := range []models.JobFilter{{SiteID: &s.ID}, {Site: s.Name}} {
				n, err := models.CountJobs(ctx, db, f)
				require.NoError(t, err)
				require.Equal(t, int(real), n, "%+v", f)
			}
		}
	})
}
