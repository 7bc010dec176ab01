package models_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

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
