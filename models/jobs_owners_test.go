package models_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobOwnersIndexJump: the owners of the jobs matching a filter, read
// by jumping through the owner index, are exactly the owners of the
// matching jobs as Go finds them from the rows: users by name with the
// latest-sorting name of any of their jobs, System, and Unknown for the
// unknown type, a user row without an id and a type the hub does not
// know; for no filter, one state, and a state no job has.
func TestJobOwnersIndexJump(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		id := func(n int64) *int64 { return &n }
		at := time.Now().UTC()
		state := vocab.JobSuccess
		job := func(typ string, owner *int64, name string) models.Job {
			return models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
				State: state, Created: at, Updated: at, Run: 1, OwnerType: typ, OwnerID: owner, OwnerName: name,
				Fields: map[string]any{}, Paths: []string{"/data"}}
		}
		// owners is what the rows say: the owners of the jobs matching f.
		owners := func(f models.JobFilter) []models.JobOwner {
			var all, matching []models.Job
			require.NoError(t, db.NewSelect().Model(&all).Scan(ctx))
			require.NoError(t, models.JobsQuery(db, &matching, f).Scan(ctx))
			names := map[int64]string{}
			for _, j := range all {
				if j.OwnerType == models.OwnerUser && j.OwnerID != nil && j.OwnerName > names[*j.OwnerID] {
					names[*j.OwnerID] = j.OwnerName
				}
			}
			users := map[int64]models.JobOwner{}
			var system, unknown bool
			for _, j := range matching {
				switch {
				case j.OwnerType == models.OwnerSystem:
					system = true
				case j.OwnerType == models.OwnerUser && j.OwnerID != nil:
					users[*j.OwnerID] = models.JobOwner{Type: models.OwnerUser, ID: *j.OwnerID, Name: names[*j.OwnerID]}
				default:
					unknown = true
				}
			}
			out := []models.JobOwner{}
			for _, u := range users {
				out = append(out, u)
			}
			sort.Slice(out, func(a, b int) bool {
				return out[a].Name < out[b].Name || out[a].Name == out[b].Name && out[a].ID < out[b].ID
			})
			if system {
				out = append(out, models.JobOwner{Type: models.OwnerSystem, ID: models.OwnerSystemID, Name: "System"})
			}
			if unknown {
				out = append(out, models.JobOwner{Type: models.OwnerUnknown, ID: models.OwnerUnknownID, Name: "Unknown"})
			}
			return out
		}
		filters := []models.JobFilter{{}, {States: []string{vocab.JobFailure}}, {States: []string{vocab.JobPaused}}}
		check := func(want ...string) {
			t.Helper()
			for _, f := range filters {
				got, err := models.JobOwners(ctx, db, f)
				require.NoError(t, err)
				require.Equal(t, owners(f), append([]models.JobOwner{}, got...), "%+v", f)
			}
			got, err := models.JobOwners(ctx, db, models.JobFilter{})
			require.NoError(t, err)
			var names []string
			for _, o := range got {
				names = append(names, o.Name)
			}
			require.Equal(t, want, names)
		}
		check()

		jobs := []models.Job{job(models.OwnerUser, id(7), "zed"), job(models.OwnerUser, id(3), "amy"), job(models.OwnerUser, id(7), "zed"),
			job(models.OwnerUser, id(3), "amy2"), job(models.OwnerUser, id(12), "bob")}
		_, err = db.NewInsert().Model(&jobs).Exec(ctx)
		require.NoError(t, err)
		check("amy2", "bob", "zed")
		state = vocab.JobFailure // FAILURE jobs of amy and of nobody known
		for _, j := range []models.Job{job(models.OwnerUser, id(3), "amy"), job("robot", nil, "robot")} {
			_, err = db.NewInsert().Model(&j).Exec(ctx)
			require.NoError(t, err)
		}
		state = vocab.JobSuccess
		check("amy2", "bob", "zed", "Unknown")
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("owner_type = ?", "robot").Exec(ctx)
		require.NoError(t, err)

		for _, j := range []models.Job{job(models.OwnerSystem, nil, "System"), job(models.OwnerUser, nil, "ghost")} {
			_, err = db.NewInsert().Model(&j).Exec(ctx)
			require.NoError(t, err)
		}
		check("amy2", "bob", "zed", "System", "Unknown")

		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("owner_id IS NULL AND owner_type = ?", models.OwnerUser).Exec(ctx)
		require.NoError(t, err)
		check("amy2", "bob", "zed", "System")
		for _, typ := range []string{"robot", "aaa", models.OwnerUnknown, "zzz"} {
			j := job(typ, nil, typ)
			_, err = db.NewInsert().Model(&j).Exec(ctx)
			require.NoError(t, err)
			check("amy2", "bob", "zed", "System", "Unknown")
			_, err = db.NewDelete().Model((*models.Job)(nil)).Where("owner_type = ?", typ).Exec(ctx)
			require.NoError(t, err)
		}
	})
}

// TestJobsCountKept: the numbers of jobs and of tasks the database keeps
// (row_counts) follow inserts of one and of many rows, deletes of one and
// of many, and the tasks a job's deletion removes by cascade.
func TestJobsCountKept(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		at := time.Now().UTC()
		check := func(want int) {
			t.Helper()
			n, err := models.CountAllJobs(ctx, db)
			require.NoError(t, err)
			real, err := db.NewSelect().Model((*models.Job)(nil)).Count(ctx)
			require.NoError(t, err)
			require.Equal(t, want, int(real))
			require.Equal(t, want, n)
		}
		check(0)
		jobs := make([]models.Job, 250)
		for i := range jobs {
			jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
				State: vocab.JobSuccess, Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, OwnerName: "System",
				Fields: map[string]any{}, Paths: []string{"/data"}}
		}
		_, err = db.NewInsert().Model(&jobs).Exec(ctx)
		require.NoError(t, err)
		check(250)
		one := jobs[0]
		one.ID = 0
		_, err = db.NewInsert().Model(&one).Exec(ctx)
		require.NoError(t, err)
		check(251)
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id = ?", one.ID).Exec(ctx)
		require.NoError(t, err)
		check(250)
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id <= ?", jobs[99].ID).Exec(ctx)
		require.NoError(t, err)
		check(150)

		// Tasks are counted the same way, including those a job's
		// deletion removes by cascade.
		checkTasks := func(want int) {
			t.Helper()
			n, err := models.CountAllTasks(ctx, db)
			require.NoError(t, err)
			real, err := db.NewSelect().Model((*models.Task)(nil)).Count(ctx)
			require.NoError(t, err)
			require.Equal(t, want, int(real))
			require.Equal(t, want, n)
		}
		checkTasks(0)
		tasks := make([]models.Task, 30)
		for i := range tasks {
			tasks[i] = models.Task{JobID: jobs[100+i%3].ID, Site: site.Name, Queue: vocab.DefaultQueue, TaskType: "premigrate",
				TaskID: fmt.Sprintf("job-%d-r1-b%d-r1-s0", jobs[100+i%3].ID, i), State: vocab.TaskSuccess, Run: 1, Created: at}
		}
		_, err = db.NewInsert().Model(&tasks).Exec(ctx)
		require.NoError(t, err)
		checkTasks(30)
		_, err = db.NewDelete().Model((*models.Task)(nil)).Where("id = ?", tasks[0].ID).Exec(ctx)
		require.NoError(t, err)
		checkTasks(29)
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id = ?", jobs[101].ID).Exec(ctx)
		require.NoError(t, err)
		checkTasks(19)
		check(149)
	})
}
