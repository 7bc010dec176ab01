package hub_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobCountersMoveByDelta: recording a batch's outcomes moves the job's
// counters by what its rows changed (not by recounting the job), and the
// result is what a full recount gives, after every batch: new paths,
// paths whose outcome changes in a later run, retried calls of the same
// task, and duplicate paths inside one batch; the number of the job's
// stats, and of those in each state, which its stats list shows as
// count, too; and its statistics (paths and bytes by state and code),
// read from counts kept the same way, equal a count of its stats.
func TestJobCountersMoveByDelta(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		j := seedJob(t, e, models.Job{Site: "alpha", Workflow: "migrate"}, vocab.JobStarted, time.Now().UTC())
		_, err := e.DB.NewUpdate().Model((*models.Job)(nil)).Set("numfiles = 300").Where("id = ?", j.ID).Exec(ctx)
		require.NoError(t, err)
		counters := func() [5]float64 {
			var got models.Job
			require.NoError(t, e.DB.NewSelect().Model(&got).Where("j.id = ?", j.ID).Scan(ctx))
			return [5]float64{float64(got.NumProcessedFiles), float64(got.NumFailedFiles), float64(got.NumSkippedFiles), got.Progress,
				float64(got.NumStats)}
		}
		states := []string{vocab.TaskSuccess, vocab.TaskFailure, vocab.TaskSkipped, vocab.TaskCancelled}
		rng := rand.New(rand.NewPCG(1, 2))
		for run := 1; run <= 6; run++ {
			task := seedTask(t, e, models.Task{JobID: j.ID, Site: j.Site, Queue: "default", TaskType: "copy",
				TaskID: fmt.Sprintf("job-%d-r%d-b0-r1-s0", j.ID, run), State: vocab.TaskStarted, Run: run})
			var outs []models.PathOutcome
			for range 80 {
				outs = append(outs, models.PathOutcome{Path: fmt.Sprintf("/d/f%03d", rng.IntN(300)), State: states[rng.IntN(len(states))],
					Code: []string{"x", "y", "z"}[rng.IntN(3)], Size: rng.Int64N(1000)})
			}
			for attempt := range 2 { // the activity retried: same rows, same counts
				require.NoError(t, models.RecordOutcomes(ctx, e.DB, j.ID, task.ID, outs))
				byDelta := counters()
				statsByDelta := dbtest.RequireStatisticsOfRows(t, e.DB, j.ID, "run %d attempt %d", run, attempt)
				require.NoError(t, models.RefreshJobCounts(ctx, e.DB, j.ID))
				require.Equal(t, counters(), byDelta, "run %d attempt %d", run, attempt)
				recounted, err := models.GetJobStatistics(ctx, e.DB, j.ID)
				require.NoError(t, err)
				require.Equal(t, statsByDelta, recounted, "run %d attempt %d", run, attempt)
				// The job stats list counts what the job keeps.
				r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/?job=%d&page_size=20", j.ID), nil)
				require.Equal(t, byDelta[4], r.Map()["count"])
				for _, state := range states { // and of each state, kept or counted
					n, err := e.DB.NewSelect().Model((*models.JobStat)(nil)).Where("job_id = ? AND state = ?", j.ID, state).Count(ctx)
					require.NoError(t, err)
					r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/?job=%d&state=%s&page_size=20", j.ID, state), nil)
					require.Equal(t, float64(n), r.Map()["count"], "run %d attempt %d state %s", run, attempt, state)
				}
			}
		}
	})
}
