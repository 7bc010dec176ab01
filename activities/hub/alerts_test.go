package hub_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// TestFailingAlert: job_inprogress_failing is raised, once per run, when
// a task records failed paths or ends in ERROR (its step failed for good
// and its batch is aborted), not for a task whose paths all succeeded or
// one cancelled.
func TestFailingAlert(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		a := &hubact.Activities{DB: db}
		s, err := models.EnsureSite(ctx, db, "failing")
		require.NoError(t, err)
		j := createJob(t, db, s, "", []string{"/d"})
		finish := func(name string, end workflows.TaskEnd) {
			t.Helper()
			task := &models.Task{JobID: j.ID, Site: s.Name, Queue: vocab.DefaultQueue, TaskType: "premigrate", TaskID: name, State: vocab.TaskStarted}
			require.NoError(t, models.CreateTask(ctx, db, task))
			end.JobID, end.TaskID = j.ID, task.ID
			_, err := a.FinishTask(ctx, end)
			require.NoError(t, err)
		}
		failing := func() int {
			t.Helper()
			alerts, err := models.Alerts(ctx, db, models.AlertFilter{Name: "job_inprogress_failing"})
			require.NoError(t, err)
			return len(alerts)
		}
		finish("ok", workflows.TaskEnd{Outcomes: []site.Outcome{{Path: "/d/a", State: site.OutcomeSuccess}}})
		finish("cancelled", workflows.TaskEnd{State: vocab.TaskCancelled})
		require.Zero(t, failing())
		finish("error", workflows.TaskEnd{State: vocab.TaskError, Error: "disk full"})
		require.Equal(t, 1, failing(), "a task in ERROR: its batch is aborted")
		finish("failed", workflows.TaskEnd{Outcomes: []site.Outcome{{Path: "/d/b", State: site.OutcomeFailure}}})
		require.Equal(t, 1, failing(), "once per run")
	})
}
