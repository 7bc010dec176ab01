package models_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
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
		east := site
		west, err := models.EnsureSite(ctx, db, "west")
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
		filters := []models.JobFilter{{}, {States: []string{vocab.JobFailure}}, {States: []string{vocab.JobPaused}},
			{Site: "east"}, {Site: "west"}, {Site: "north"}, {Site: "west", States: []string{vocab.JobSuccess}}, {Site: "nowhere"},
			{SiteID: &east.ID}, {SiteID: &west.ID}, {SiteID: &west.ID, Site: "east"}}
		check := func(want ...string) {
			t.Helper()
			for _, f := range filters {
				resolved := f
				require.NoError(t, resolved.ResolveSite(ctx, db))
				for _, g := range []models.JobFilter{f, resolved} {
					got, err := models.JobOwners(ctx, db, g)
					require.NoError(t, err)
					require.Equal(t, owners(f), append([]models.JobOwner{}, got...), "%+v", f)
				}
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
		state, site = vocab.JobFailure, west // FAILURE jobs of amy and of nobody known, on another site
		for _, j := range []models.Job{job(models.OwnerUser, id(3), "amy"), job("robot", nil, "robot")} {
			_, err = db.NewInsert().Model(&j).Exec(ctx)
			require.NoError(t, err)
		}
		state, site = vocab.JobSuccess, east
		check("amy2", "bob", "zed", "Unknown")
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("owner_type = ?", "robot").Exec(ctx)
		require.NoError(t, err)

		for _, j := range []models.Job{job(models.OwnerSystem, nil, "System"), job(models.OwnerUser, nil, "ghost")} {
			_, err = db.NewInsert().Model(&j).Exec(ctx)
			require.NoError(t, err)
		}
		check("amy2", "bob", "zed", "System", "Unknown")
		// west renamed north, its old name given to a new site: ?site=west
		// is that site's jobs and those created on west.
		_, err = db.NewUpdate().Table("sites").Set("name = 'north'").Where("id = ?", west.ID).Exec(ctx)
		require.NoError(t, err)
		site, err = models.EnsureSite(ctx, db, "west")
		require.NoError(t, err)
		for _, j := range []models.Job{job(models.OwnerUser, id(12), "bob"), job(models.OwnerSystem, nil, "System")} {
			_, err = db.NewInsert().Model(&j).Exec(ctx)
			require.NoError(t, err)
		}
		site = east
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
// (row_counts), in all and in each state, follow inserts of one and of
// many rows, deletes of one and of many, updates that change states (of
// one row and of many, to a state no row had before) and those that do
// not, and the tasks a job's deletion removes by cascade; a list filtered
// by one state reads its count there.
func TestJobsCountKept(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		at := time.Now().UTC()
		// checkStates: the kept number of each state is what COUNT(*) ...
		// GROUP BY state finds, read as the one-state list reads it (for
		// the states the list knows) and from row_counts (for all).
		checkStates := func(table string, states []string, count func(state string) (int, error)) {
			t.Helper()
			var rows []struct {
				State string `bun:"state"`
				N     int    `bun:"n"`
			}
			require.NoError(t, db.NewRaw("SELECT state, COUNT(*) AS n FROM ? GROUP BY state", bun.Ident(table)).Scan(ctx, &rows))
			real := map[string]int{}
			for _, r := range rows {
				real[r.State] = r.N
			}
			var kept []struct {
				Name string `bun:"name"`
				N    int    `bun:"n"`
			}
			require.NoError(t, db.NewSelect().Table("row_counts").Column("name", "n").Where("name LIKE ?", table+":state:%").Scan(ctx, &kept))
			keptByState := map[string]int{}
			for _, k := range kept {
				if k.N != 0 {
					keptByState[strings.TrimPrefix(k.Name, table+":state:")] = k.N
				}
			}
			require.Equal(t, real, keptByState, table)
			for _, st := range states {
				n, err := count(st)
				require.NoError(t, err)
				require.Equal(t, real[st], n, "%s in state %s", table, st)
			}
		}
		check := func(want int) {
			t.Helper()
			n, err := models.CountAllJobs(ctx, db)
			require.NoError(t, err)
			real, err := db.NewSelect().Model((*models.Job)(nil)).Count(ctx)
			require.NoError(t, err)
			require.Equal(t, want, int(real))
			require.Equal(t, want, n)
			checkStates("jobs", models.JobStates, func(state string) (int, error) {
				return models.CountJobs(ctx, db, models.JobFilter{States: []string{state}})
			})
		}
		check(0)
		jobs := make([]models.Job, 250)
		for i := range jobs {
			jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
				State: vocab.JobSuccess, Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, OwnerName: "System",
				Fields: map[string]any{}, Paths: []string{"/data"}}
			if i%5 == 0 {
				jobs[i].State = vocab.JobFailure
			}
		}
		_, err = db.NewInsert().Model(&jobs).Exec(ctx)
		require.NoError(t, err)
		check(250)
		one := jobs[1]
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

		// State changes: of one job, to a state no job had yet, of many
		// jobs in one statement (some already in that state), and updates
		// that leave the state as it is.
		require.NoError(t, models.UpdateJob(ctx, db, jobs[101].ID, models.JobUpdate{State: vocab.JobStarted}))
		check(150)
		require.NoError(t, models.UpdateJob(ctx, db, jobs[101].ID, models.JobUpdate{State: vocab.JobPaused}))
		check(150)
		_, err = db.NewUpdate().Model((*models.Job)(nil)).Set("state = ?", vocab.JobFailure).Where("id % 3 = 0").Exec(ctx)
		require.NoError(t, err)
		check(150)
		_, err = db.NewUpdate().Model((*models.Job)(nil)).Set("state = state").Set("numfiles = 7").Where("id > 0").Exec(ctx)
		require.NoError(t, err)
		require.NoError(t, models.UpdateJob(ctx, db, jobs[102].ID, models.JobUpdate{State: jobs[102].State}))
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
			checkStates("tasks", models.TaskStates, func(state string) (int, error) {
				return models.CountTasks(ctx, db, models.TaskFilter{States: []string{state}})
			})
		}
		checkTasks(0)
		tasks := make([]models.Task, 30)
		states := []string{vocab.TaskSuccess, vocab.TaskStarted, vocab.TaskPending, vocab.TaskFailure}
		for i := range tasks {
			tasks[i] = models.Task{JobID: jobs[100+i%3].ID, Site: site.Name, Queue: vocab.DefaultQueue, TaskType: "premigrate",
				TaskID: fmt.Sprintf("job-%d-r1-b%d-r1-s0", jobs[100+i%3].ID, i), State: states[i%len(states)], Run: 1, Created: at}
		}
		_, err = db.NewInsert().Model(&tasks).Exec(ctx)
		require.NoError(t, err)
		checkTasks(30)
		_, err = db.NewDelete().Model((*models.Task)(nil)).Where("id = ?", tasks[0].ID).Exec(ctx)
		require.NoError(t, err)
		checkTasks(29)
		require.NoError(t, models.FinishTask(ctx, db, tasks[1].ID, vocab.TaskSuccess, nil))
		checkTasks(29)
		require.NoError(t, models.CancelOpenTasks(ctx, db, jobs[102].ID))
		checkTasks(29)
		_, err = db.NewUpdate().Model((*models.Task)(nil)).Set("state = state").Set("numpaths = 3").Where("id > 0").Exec(ctx)
		require.NoError(t, err)
		checkTasks(29)
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id = ?", jobs[101].ID).Exec(ctx)
		require.NoError(t, err)
		checkTasks(19)
		check(149)
		_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id IN (?)", bun.In([]int64{jobs[100].ID, jobs[102].ID})).Exec(ctx)
		require.NoError(t, err)
		checkTasks(0)
		check(147)

		// The one-state lists read the kept number, not the rows: moved
		// behind the rows' back, it is what they answer.
		_, err = db.NewUpdate().Table("row_counts").Set("n = n + 1000").Where("name IN (?)", bun.In([]string{"jobs:state:FAILURE", "tasks:state:SUCCESS"})).Exec(ctx)
		require.NoError(t, err)
		failed, err := db.NewSelect().Model((*models.Job)(nil)).Where("state = ?", vocab.JobFailure).Count(ctx)
		require.NoError(t, err)
		n, err := models.CountJobs(ctx, db, models.JobFilter{States: []string{vocab.JobFailure}})
		require.NoError(t, err)
		require.Equal(t, int(failed)+1000, n)
		n, err = models.CountTasks(ctx, db, models.TaskFilter{States: []string{vocab.TaskSuccess}})
		require.NoError(t, err)
		require.Equal(t, 1000, n)
		// Any other filter counts its rows.
		n, err = models.CountJobs(ctx, db, models.JobFilter{States: []string{vocab.JobFailure}, Site: site.Name})
		require.NoError(t, err)
		require.Equal(t, int(failed), n)
		n, err = models.CountJobs(ctx, db, models.JobFilter{States: []string{vocab.JobFailure, vocab.JobSuccess}})
		require.NoError(t, err)
		require.Equal(t, 147, n)
		_, err = db.NewUpdate().Model((*models.Job)(nil)).Set("has_failures = ?", true).Where("state = ? AND id % 2 = 0", vocab.JobSuccess).Exec(ctx)
		require.NoError(t, err)
		withFailures, err := db.NewSelect().Model((*models.Job)(nil)).Where("state = ? AND has_failures = ?", vocab.JobSuccess, true).Count(ctx)
		require.NoError(t, err)
		require.NotZero(t, withFailures)
		n, err = models.CountJobs(ctx, db, models.JobFilter{States: []string{vocab.JobHasFailures}})
		require.NoError(t, err)
		require.Equal(t, int(withFailures), n)
	})
}
