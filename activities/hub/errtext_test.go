package hub_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// failedStep is a failed activity's error as a workflow gets it from
// Temporal (stepErr.Error()) and hands to the hub to record.
const failedStep = "activity error (type: RunStep, scheduledEventID: 12, startedEventID: 13, identity: 77@host@): " +
	"disk full (type: *fs.PathError, retryable: true)"

// requireNoTemporalWording fails when a stored error text carries
// Temporal's ids or types.
func requireNoTemporalWording(t *testing.T, what, text string) {
	t.Helper()
	for _, word := range []string{"activity error", "scheduledEventID", "startedEventID", "identity:", "(type:", "retryable"} {
		require.NotContains(t, text, word, "%s stored with Temporal's wording: %q", what, text)
	}
	require.Contains(t, text, "disk full", what)
}

// TestRecordedErrorsHaveNoTemporalWording: a failed step's error, as the
// job, settings and action workflows hand it to the hub, is stored with
// its messages alone (a task's result, a job's error, a settings task's
// results, an action's results, a space's state at a site, a C+J item's
// log), not only cleaned when shown.
func TestRecordedErrorsHaveNoTemporalWording(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		a := &hubact.Activities{DB: db}
		s, err := models.EnsureSite(ctx, db, "errtext")
		require.NoError(t, err)

		j := createJob(t, db, s, "", []string{"/d"})
		task := &models.Task{JobID: j.ID, Site: s.Name, Queue: vocab.DefaultQueue, TaskType: "premigrate", TaskID: "job-errtext-t", State: vocab.TaskStarted}
		require.NoError(t, models.CreateTask(ctx, db, task))
		_, err = a.FinishTask(ctx, workflows.TaskEnd{JobID: j.ID, TaskID: task.ID, State: vocab.TaskError, Error: failedStep})
		require.NoError(t, err)
		row, err := models.GetTask(ctx, db, task.ID)
		require.NoError(t, err)
		requireNoTemporalWording(t, "a task's error", row.Result["error"].(string))

		_, err = a.FinishJob(ctx, workflows.JobEnd{JobID: j.ID, State: vocab.JobFailure, Error: "batch 1: " + failedStep})
		require.NoError(t, err)
		got, err := models.GetJob(ctx, db, j.ID)
		require.NoError(t, err)
		requireNoTemporalWording(t, "a job's error", got.Error)

		st := &models.SettingsTask{TaskType: models.SettingsTaskApply, Site: s.Name, Request: []byte(`{}`)}
		require.NoError(t, models.CreateSettingsTask(ctx, db, st))
		results, err := json.Marshal(map[string]string{"error": failedStep})
		require.NoError(t, err)
		require.NoError(t, a.FinishSettingsTask(ctx, workflows.SettingsTaskOutcome{TaskID: st.ID, State: vocab.TaskFailure, Results: results}))
		gotSt, err := models.GetSettingsTask(ctx, db, st.ID)
		require.NoError(t, err)
		var stored map[string]string
		require.NoError(t, json.Unmarshal(gotSt.Results, &stored))
		requireNoTemporalWording(t, "a settings task's error", stored["error"])

		u := &models.User{Username: "errtext"}
		require.NoError(t, models.CreateUser(ctx, db, u, nil, 0))
		act, err := models.CreateAction(ctx, db, "sync_nas_users", u.ID)
		require.NoError(t, err)
		require.NoError(t, a.RecordAction(ctx, workflows.ActionState{ID: act.ID, State: vocab.TaskFailure, Results: "errtext: " + failedStep}))
		gotAct, err := models.GetAction(ctx, db, act.ID)
		require.NoError(t, err)
		requireNoTemporalWording(t, "an action's results", gotAct.Results)
	})
}
