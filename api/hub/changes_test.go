package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// The fault tests of the one write mechanism (activities/changes,
// docs/changes.md): whatever happens between the commit of a change and
// its workflow hearing of it, the record and the workflow agree in the end
// and nothing runs twice.

// deliverAll runs the reconciler's pass as if its delay had passed.
func deliverAll(t *testing.T, e *apitest.Env) int {
	n, err := e.API.Changes.DeliverAsOf(context.Background(), time.Now().Add(time.Hour))
	require.NoError(t, err)
	return n
}

func owed(t *testing.T, e *apitest.Env) []models.Intent {
	var all []models.Intent
	require.NoError(t, e.DB.NewSelect().Model(&all).Order("id").Scan(context.Background()))
	return all
}

// jobsAtWest runs the hub worker and a site "west" with three files
// under /data.
func jobsAtWest(t *testing.T, e *apitest.Env) {
	e.StartHubWorker()
	s := newJobSite(t, e, "west")
	makeTree(t, s.root, 3)
}

// workflowRuns counts the executions Temporal has for workflow id.
func workflowRuns(t *testing.T, e *apitest.Env, id string) int {
	var n int
	require.Eventually(t, func() bool {
		resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: e.Namespace, Query: fmt.Sprintf("WorkflowId = %q", id)})
		if err != nil {
			return false
		}
		n = len(resp.GetExecutions())
		return n > 0
	}, 30*time.Second, 50*time.Millisecond)
	return n
}

// requireRanOnce checks that job id succeeded in one run of its workflow,
// with one task per step of its one batch.
func requireRanOnce(t *testing.T, e *apitest.Env, id int64) {
	j := waitJob(t, e, id)
	require.Equal(t, vocab.JobSuccess, j["state"], j)
	require.Equal(t, 1, workflowRuns(t, e, workflows.JobWorkflowID(id)), "one workflow run")
	r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/?job=%d", id), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.EqualValues(t, 1, r.Map()["count"], "one task: %s", r.Body)
	require.Empty(t, owed(t, e), "nothing is owed any more")
	require.Zero(t, deliverAll(t, e))
}

func TestChangeWhileTemporalIsAway(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		jobsAtWest(t, e)
		away := apitest.UnreachableTemporal(t)

		// Temporal stops between the commit and the start.
		e.API.Changes.Temporal = away
		id := startJob(t, e, "west", "premigrate", []string{"/data"})
		require.Equal(t, vocab.JobPending, jobState(e, id)["state"], "the job waits for Temporal")
		intents := owed(t, e)
		require.Len(t, intents, 1)
		require.Equal(t, id, intents[0].RefID)
		require.Positive(t, intents[0].Attempts, "the request tried at once")

		// Temporal is back: the reconciler starts the job, once.
		e.API.Changes.Temporal = e.Temporal
		require.Equal(t, 1, deliverAll(t, e))
		requireRanOnce(t, e, id)
	})
}

// TestJobCancelledBeforeItsStartIsDelivered: a job cancelled while its
// start is still owed (Temporal was away) ends CANCELLED once the start is
// delivered, never stays CANCELLING with no workflow to finish it.
func TestJobCancelledBeforeItsStartIsDelivered(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		jobsAtWest(t, e)
		e.API.Changes.Temporal = apitest.UnreachableTemporal(t)
		id := startJob(t, e, "west", "premigrate", []string{"/data"})
		e.API.Changes.Temporal = e.Temporal
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, vocab.JobCancelling, jobState(e, id)["state"])

		require.Equal(t, 1, deliverAll(t, e), "the start is delivered")
		j := waitJob(t, e, id)
		require.Equal(t, vocab.JobCancelled, j["state"], j)
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/?job=%d", id), nil)
		require.EqualValues(t, 0, r.Map()["count"], "nothing ran: %s", r.Body)
		require.Empty(t, owed(t, e))

		// A start still owed for a run that began and closed without
		// recording its end (terminated) starts no second workflow when the
		// job is then cancelled: the cancel ends it (EndJob).
		ctx := context.Background()
		e.API.Changes.Temporal = apitest.UnreachableTemporal(t)
		id = startJob(t, e, "west", "premigrate", []string{"/data"})
		intent := owed(t, e)[0]
		e.API.Changes.Temporal = e.Temporal
		require.Equal(t, 1, deliverAll(t, e))
		require.NoError(t, e.Temporal.TerminateWorkflow(ctx, workflows.JobWorkflowID(id), "", "lost"))
		_, err := e.DB.NewInsert().Model(&intent).Exec(ctx)
		require.NoError(t, err)
		require.NoError(t, models.MarkCancelling(ctx, e.DB, id))
		require.Equal(t, 1, deliverAll(t, e))
		require.Equal(t, 1, workflowRuns(t, e, workflows.JobWorkflowID(id)), "no second workflow for the run")
		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, vocab.JobCancelled, waitJob(t, e, id)["state"])
	})
}

func TestChangeSurvivesTheHubKilledAfterCommit(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		jobsAtWest(t, e)

		// A second hub process dies (SIGKILL) right after the job's commit,
		// before it could start the workflow.
		url := e.StartAPIProcess("HUB_FAULT_POINT=changes.committed@1")
		body := map[string]any{"site": "west", "workflow": "premigrate", "paths": []string{"/data"}}
		_, err := e.DoURL(url, http.MethodPost, "/api/file/workflow/", apitest.Bearer(e.Admin), body)
		require.Error(t, err, "the process died before answering")

		var jobs []models.Job
		require.NoError(t, e.DB.NewSelect().Model(&jobs).Scan(context.Background()))
		require.Len(t, jobs, 1, "the job was committed")
		require.Equal(t, vocab.JobPending, jobs[0].State)
		require.Len(t, owed(t, e), 1, "with the start it owes")

		require.Equal(t, 1, deliverAll(t, e))
		requireRanOnce(t, e, jobs[0].ID)
		apitest.RecordHistories(t, e.Temporal)
	})
}

func TestChangeDeliveredTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		jobsAtWest(t, e)

		// A job start delivered, then delivered again, as after a crash
		// between the start and recording it: the job runs once.
		away := apitest.UnreachableTemporal(t)
		e.API.Changes.Temporal = away
		id := startJob(t, e, "west", "premigrate", []string{"/data"})
		intent := owed(t, e)[0]
		e.API.Changes.Temporal = e.Temporal
		require.Equal(t, 1, deliverAll(t, e))
		waitJob(t, e, id)
		_, err := e.DB.NewInsert().Model(&intent).Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, deliverAll(t, e))
		requireRanOnce(t, e, id)

		// The same resubmit sent twice: one new run.
		_, err = e.DB.NewUpdate().Model((*models.Job)(nil)).Set("has_failures = TRUE").Where("id = ?", id).Exec(ctx)
		require.NoError(t, err)
		for range 2 {
			r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
			require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, r.Status, string(r.Body))
		}
		j := waitJob(t, e, id)
		require.EqualValues(t, 2, j["run"], j)
		require.Empty(t, owed(t, e))

	})
}

func TestSpaceOpsDeliveredTwiceRunOnce(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		s := newJobSite(t, e, "west")

		// The ops reach Temporal, and the hub dies before recording it: the
		// reconciler delivers them again before the workflow (no hub worker
		// yet) has claimed them.
		// Outside /spaces/: a space the hub API alone manages, whose folder
		// its SpaceWorkflow makes (docs/spaces-one-object.md).
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "twice", "mountpoint": "/projects/twice",
			"sites": []any{map[string]any{"name": "west", "label": "Twice"}}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		spaceID := int64(r.Map()["id"].(float64))
		ops := owed(t, e)
		require.Len(t, ops, 1)
		require.Equal(t, models.IntentDelivered, ops[0].State)
		_, err := e.DB.NewUpdate().Model(&ops[0]).Set("state = ?", models.IntentPending).WherePK().Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, deliverAll(t, e))

		// The workflow now gets both copies, and acts on one.
		e.StartHubWorker()
		require.Eventually(t, func() bool { return len(owed(t, e)) == 0 }, 30*time.Second, 20*time.Millisecond, "the workflow claims the ops")
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(s.root, "projects", "twice"))
			return err == nil
		}, 30*time.Second, 20*time.Millisecond, "the folder is made")
		require.Equal(t, 1, activityCount(t, e, workflows.SpaceWorkflowID(spaceID), "CreateSpaceDir"), "the folder was made once")
		apitest.RecordHistories(t, e.Temporal)
	})
}

// activityCount counts the activities of type typ scheduled across every
// run of workflow id.
func activityCount(t *testing.T, e *apitest.Env, id, typ string) int {
	ctx := context.Background()
	resp, err := e.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: e.Namespace, Query: fmt.Sprintf("WorkflowId = %q", id)})
	require.NoError(t, err)
	n := 0
	for _, ex := range resp.GetExecutions() {
		it := e.Temporal.GetWorkflowHistory(ctx, id, ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == typ {
				n++
			}
		}
	}
	return n
}

// postJobWithKey submits a premigrate job of /data with an
// Idempotency-Key and returns the job id the answer names.
func postJobWithKey(t *testing.T, e *apitest.Env, key string) int64 {
	body, err := json.Marshal(map[string]any{"site": "west", "workflow": "premigrate", "paths": []string{"/data"}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.URL+"/api/file/workflow/", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", apitest.Bearer(e.Admin))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Job int64 }
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Job
}

// TestJobRequestSentTwice: a client that retries a job request (it lost
// the answer) with the same Idempotency-Key gets the same job, which runs
// once, even when the copies arrive at the same time.
func TestJobRequestSentTwice(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		jobsAtWest(t, e)

		id := postJobWithKey(t, e, "retry-1")
		require.Equal(t, id, postJobWithKey(t, e, "retry-1"), "the retry names the same job")
		requireRanOnce(t, e, id)

		ids := make(chan int64, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); ids <- postJobWithKey(t, e, "retry-2") }()
		}
		wg.Wait()
		close(ids)
		var first int64
		for got := range ids {
			if first == 0 {
				first = got
			}
			require.Equal(t, first, got, "copies sent at once name one job")
		}
		require.NotEqual(t, id, first, "another key is another job")
		n, err := e.DB.NewSelect().Model((*models.Job)(nil)).Count(context.Background())
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		requireRanOnce(t, e, first)

		// Attempts of one schedule firing at once (its jobs have no owner
		// id, and NULLs are never equal in a unique index) make one job.
		sch := createSchedule(t, e, map[string]any{"name": "nightly", "site": "west", "minute": "0", "hour": "3"})
		jobs := make(chan int64, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := "firing-1/1"
				j, _, err := e.API.Changes.SubmitJob(context.Background(), changes.JobRequest{Site: "west", Workflow: "premigrate",
					Paths: []string{"/data"}, IdempotencyKey: &key, Owner: changes.JobOwner{ScheduleID: &sch, ScheduleName: "nightly"}})
				require.NoError(t, err)
				jobs <- j.ID
			}()
		}
		wg.Wait()
		close(jobs)
		firing := <-jobs
		for got := range jobs {
			require.Equal(t, firing, got, "attempts of one firing name one job")
		}
		requireRanOnce(t, e, firing)
	})
}
