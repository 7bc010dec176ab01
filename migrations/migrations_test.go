package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/migrations"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestDownAndUpAgain: every migration can be rolled back and applied
// again, on both databases (the up and down files, and the Go migration
// with its per-dialect triggers).
func TestDownAndUpAgain(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		m, err := migrations.NewMigrator(db)
		require.NoError(t, err)
		for {
			g, err := m.Rollback(ctx)
			require.NoError(t, err)
			if g.IsZero() {
				break
			}
		}
		ms, err := m.MigrationsWithStatus(ctx)
		require.NoError(t, err)
		require.Empty(t, ms.Applied(), "all rolled back")
		require.NoError(t, migrations.Up(ctx, db))
		ms, err = m.MigrationsWithStatus(ctx)
		require.NoError(t, err)
		require.Empty(t, ms.Unapplied())
	})
}

// TestStateCountsFilled: the migration that keeps the number of jobs and
// of tasks in each state counts the rows already there, and its rollback
// stops keeping them.
func TestStateCountsFilled(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		// kept is the counts row_counts holds for table's states; real is
		// COUNT(*) ... GROUP BY state.
		kept := func(table string) map[string]int {
			var rows []struct {
				Name string `bun:"name"`
				N    int    `bun:"n"`
			}
			require.NoError(t, db.NewSelect().Table("row_counts").Column("name", "n").Where("name LIKE ?", table+":state:%").Scan(ctx, &rows))
			out := map[string]int{}
			for _, r := range rows {
				if r.N != 0 { // a state no row has any more
					out[strings.TrimPrefix(r.Name, table+":state:")] = r.N
				}
			}
			return out
		}
		real := func(table string) map[string]int {
			var rows []struct {
				State string `bun:"state"`
				N     int    `bun:"n"`
			}
			require.NoError(t, db.NewRaw("SELECT state, COUNT(*) AS n FROM ? GROUP BY state", bun.Ident(table)).Scan(ctx, &rows))
			out := map[string]int{}
			for _, r := range rows {
				out[r.State] = r.N
			}
			return out
		}
		insert := func() {
			site, err := models.EnsureSite(ctx, db, "east")
			require.NoError(t, err)
			at := time.Now().UTC()
			jobs := make([]models.Job, 12)
			for i := range jobs {
				jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
					State: models.JobStates[i%3], Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, OwnerName: "System",
					Fields: map[string]any{}, Paths: []string{"/data"}}
			}
			_, err = db.NewInsert().Model(&jobs).Exec(ctx)
			require.NoError(t, err)
			tasks := make([]models.Task, 10)
			for i := range tasks {
				tasks[i] = models.Task{JobID: jobs[i].ID, Site: site.Name, Queue: vocab.DefaultQueue, TaskType: "premigrate",
					TaskID: fmt.Sprintf("job-%d-r1-b%d-r1-s0", jobs[i].ID, i), State: models.TaskStates[i%4], Run: 1, Created: at}
			}
			_, err = db.NewInsert().Model(&tasks).Exec(ctx)
			require.NoError(t, err)
		}

		rollBackAlone(t, db, "20261126020000") // the state counts' migration
		insert()
		require.Empty(t, kept("jobs"))
		require.Empty(t, kept("tasks"))

		require.NoError(t, migrations.Up(ctx, db))
		require.Len(t, real("jobs"), 3)
		require.Len(t, real("tasks"), 4)
		require.Equal(t, real("jobs"), kept("jobs"))
		require.Equal(t, real("tasks"), kept("tasks"))
		insert()
		_, err := db.NewUpdate().Table("tasks").Set("state = ?", vocab.TaskFailure).Where("id % 2 = 0").Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, real("jobs"), kept("jobs"))
		require.Equal(t, real("tasks"), kept("tasks"))
	})
}

// rollBackAlone rolls back the applied migration called name alone (made
// the last group first).
func rollBackAlone(t *testing.T, db *bun.DB, name string) {
	ctx := context.Background()
	m, err := migrations.NewMigrator(db)
	require.NoError(t, err)
	res, err := db.NewUpdate().Table("bun_migrations").Set("group_id = (SELECT MAX(group_id) + 1 FROM bun_migrations)").
		Where("name = ?", name).Exec(ctx)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "migration %s is applied", name)
	g, err := m.Rollback(ctx)
	require.NoError(t, err)
	require.Len(t, g.Migrations, 1)
}

// TestJobStatCountsFilled: the migration that keeps each job's counts of
// paths and bytes by state and code counts the job stats already there
// (sizes unknown counted as 0 bytes), and RecordOutcomes moves them from
// there.
func TestJobStatCountsFilled(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		rollBackAlone(t, db, "20261127010000")
		jobs := insertJobs(t, db, 3, func(int, *models.Job) {})
		at := jobs[0].Created
		var stats []models.JobStat
		states := []string{vocab.TaskSuccess, vocab.TaskFailure, vocab.TaskSkipped}
		for i := range 60 {
			st := models.JobStat{JobID: jobs[i%3].ID, Path: fmt.Sprintf("/data/%d", i), State: states[i/3%3], Code: fmt.Sprintf("c%d", i%4), Updated: at}
			if i%5 != 0 {
				size := int64(i)
				st.Size = &size
			}
			stats = append(stats, st)
		}
		_, err := db.NewInsert().Model(&stats).Exec(ctx)
		require.NoError(t, err)
		require.NoError(t, migrations.Up(ctx, db))

		task := &models.Task{JobID: jobs[0].ID, Site: jobs[0].Site, Queue: vocab.DefaultQueue, TaskType: "premigrate", TaskID: "t1", State: vocab.TaskStarted, Run: 1}
		require.NoError(t, models.CreateTask(ctx, db, task))
		require.NoError(t, models.RecordOutcomes(ctx, db, jobs[0].ID, task.ID, []models.PathOutcome{
			{Path: "/data/0", State: vocab.TaskSuccess, Code: "c9", Size: 7}, {Path: "/data/new", State: vocab.TaskFailure, Code: "c0", Size: 3}}))
		for _, j := range jobs {
			dbtest.RequireStatisticsOfRows(t, db, j.ID, "job %d", j.ID)
		}
	})
}

// TestJobStateSumsFilled: the migration that keeps the sums of the
// finished jobs' counters adds up the jobs already there: the summary of
// every job, read from them, agrees with one read from the jobs.
func TestJobStateSumsFilled(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		rollBackAlone(t, db, "20261127020000")
		insertJobs(t, db, 24, func(i int, j *models.Job) {
			j.State, j.HasFailures = models.JobStates[i%8], i%3 == 0
			j.NumFiles, j.NumProcessedFiles, j.NumFailedFiles = int64(10+i), int64(i), int64(i%3)
			j.NumSkippedFiles, j.NumAbortedFiles, j.NumCancelledFiles = int64(i%2), int64(i%4), int64(i%5)
		})
		require.NoError(t, migrations.Up(ctx, db))
		// The same summary, read from the jobs themselves (a filter).
		want, err := models.SummarizeJobs(ctx, db, models.JobFilter{Site: "east"})
		require.NoError(t, err)
		require.EqualValues(t, 24, want.Count)
		got, err := models.SummarizeJobs(ctx, db, models.JobFilter{})
		require.NoError(t, err)
		require.Equal(t, want, got)
		var kept int
		require.NoError(t, db.NewSelect().Table("job_state_sums").ColumnExpr("COUNT(*)").Scan(ctx, &kept))
		require.Equal(t, 3, kept, "one row per finished state")
	})
}

// insertJobs inserts n STARTED jobs of site "east", each as edit leaves
// it, with plain SQL (no hub code runs), and returns them.
func insertJobs(t *testing.T, db *bun.DB, n int, edit func(i int, j *models.Job)) []models.Job {
	ctx := context.Background()
	site, err := models.EnsureSite(ctx, db, "east")
	require.NoError(t, err)
	at := time.Now().UTC()
	jobs := make([]models.Job, n)
	for i := range jobs {
		jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue, State: vocab.JobStarted,
			Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, Fields: map[string]any{}, Paths: []string{"/data"}}
		edit(i, &jobs[i])
	}
	_, err = db.NewInsert().Model(&jobs).Exec(ctx)
	require.NoError(t, err)
	return jobs
}
