package models_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobStatisticsByStateAndCode: a job's statistics, read in one pass
// grouped by state and code, count its paths by state and by code and
// add their bytes by state, where a code spans states and a state has
// several codes, and after a later outcome replaces an earlier one.
func TestJobStatisticsByStateAndCode(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		job, task := jobWithTask(t, db, "east")
		require.NoError(t, models.RecordOutcomes(ctx, db, job.ID, task.ID, []models.PathOutcome{
			{Path: "/a", State: vocab.TaskSuccess, Code: "ok", Size: 1},
			{Path: "/b", State: vocab.TaskSuccess, Code: "ok", Size: 2},
			{Path: "/c", State: vocab.TaskSuccess, Code: "copied", Size: 4},
			{Path: "/d", State: vocab.TaskFailure, Code: "failed", Size: 8},
			{Path: "/e", State: vocab.TaskFailure, Code: "io", Size: 16},
			{Path: "/f", State: vocab.TaskSkipped, Code: "ok", Size: 32},
			{Path: "/g", State: vocab.TaskFailure, Code: "io", Size: 64},
		}))
		// A later outcome of /g replaces its failure.
		require.NoError(t, models.RecordOutcomes(ctx, db, job.ID, task.ID, []models.PathOutcome{
			{Path: "/g", State: vocab.TaskSuccess, Code: "ok", Size: 128},
		}))
		st, err := models.GetJobStatistics(ctx, db, job.ID)
		require.NoError(t, err)
		require.EqualValues(t, 7, st.Files)
		require.Equal(t, map[string]int64{vocab.TaskSuccess: 4, vocab.TaskFailure: 2, vocab.TaskSkipped: 1}, st.ByState)
		require.Equal(t, map[string]int64{"ok": 4, "copied": 1, "failed": 1, "io": 1}, st.ByCode)
		require.Equal(t, map[string]int64{vocab.TaskSuccess: 135, vocab.TaskFailure: 24, vocab.TaskSkipped: 32}, st.BytesByState)
		require.EqualValues(t, 191, st.Bytes)
	})
}

// TestJobStatCountsUnderConcurrentBatches: eight tasks of one job record
// their batches at once (each twice, as a retried activity does), over
// the same paths, so that outcomes of one path race to replace one
// another, while the job's counts are recounted beside them; no writer
// deadlocks or fails, and the kept counts then equal a count of the job's
// stats.
func TestJobStatCountsUnderConcurrentBatches(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		job, _ := jobWithTask(t, db, "east")
		states := []string{vocab.TaskSuccess, vocab.TaskFailure, vocab.TaskSkipped}
		var g errgroup.Group
		for w := range 8 {
			task := &models.Task{JobID: job.ID, Site: job.Site, Queue: vocab.DefaultQueue, TaskType: "premigrate",
				TaskID: fmt.Sprintf("east-w%d", w), State: vocab.TaskStarted, Run: 1}
			require.NoError(t, models.CreateTask(ctx, db, task))
			g.Go(func() error {
				for b := range 10 {
					var outs []models.PathOutcome
					for i := range 50 {
						p := (b*25 + i) % 200 // every worker's batch b has the same paths
						outs = append(outs, models.PathOutcome{Path: fmt.Sprintf("/p%05d", p), State: states[(p+w)%3],
							Code: fmt.Sprintf("c%d", (p+b)%4), Size: int64(p)})
					}
					for range 2 {
						if err := models.RecordOutcomes(ctx, db, job.ID, task.ID, outs); err != nil {
							return err
						}
					}
				}
				return nil
			})
		}
		g.Go(func() error {
			for range 20 {
				if err := models.RefreshJobCounts(ctx, db, job.ID); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, g.Wait())
		dbtest.RequireStatisticsOfRows(t, db, job.ID)
	})
}
