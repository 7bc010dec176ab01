package hub_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobSurvivesTheHubWorkerKilled kills the hub worker (SIGKILL, a
// process of its own) at the worst instant of each of a job's local
// bookkeeping calls: the call has committed, and the workflow does not
// know it yet (its fault point "<name>.done"; a local activity's result
// reaches history only with the workflow task that ran it, so the calls
// before it in that task run again too, after it). Another hub worker
// takes the job over; the job ends as if nothing had happened: each file
// premigrated and counted once, one task for its one batch, the workflow
// completed. (Killed after SetJobState, a plan read again would have found
// the job STARTED and taken the start for one delivered twice: the plan
// is read through the server, recorded first.)
func TestJobSurvivesTheHubWorkerKilled(t *testing.T) {
	t.Parallel()
	calls := []string{"SetJobState", "JobPathsPage", "RecordDiscovery", "JobSite", "StartTask", "FinishTask", "FinishJob"}
	for _, call := range calls {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			apitest.Each(t, func(t *testing.T, e *apitest.Env) {
				s := newJobSite(t, e, "west")
				files := makeTree(t, s.root, 3)
				id := killHubWorkerAt(t, e, call+".done@1", []string{"/data"})

				e.StartHubWorker()
				requireWorkflowDone(t, e, id)
				job := waitJob(t, e, id)
				require.Equal(t, vocab.JobSuccess, job["state"], job)
				require.EqualValues(t, 3, job["numfiles"], job)
				require.EqualValues(t, 3, job["numprocessedfiles"], job)
				for list, want := range map[string]int{"tasks": 1, "jobstats": 3} {
					r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/%s/?job=%d", list, id), nil)
					require.Equal(t, http.StatusOK, r.Status, string(r.Body))
					require.EqualValues(t, want, r.Map()["count"], "%s: %s", list, r.Body)
				}
				requireTargetMatches(t, s, files)
				requireBookkeepingIsLocal(t, e, id)
			})
		})
	}
}

// TestResubmitWhileTheHubWorkerIsDown: the hub worker dies right after
// recording a job's end (SUCCESS with a path that failed); the job is
// resubmitted before another worker takes over. The old run's workflow,
// running its last calls again, must not record its state or end over
// the new run (which would then never start): the new run runs.
func TestResubmitWhileTheHubWorkerIsDown(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		s := newJobSite(t, e, "west")
		makeTree(t, s.root, 3)
		id := killHubWorkerAt(t, e, "FinishJob.done@1", []string{"/data", "/missing"})
		job := jobState(e, id)
		require.Equal(t, vocab.JobSuccess, job["state"], job)
		require.Equal(t, true, job["has_failures"], job)

		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		e.StartHubWorker()
		requireWorkflowDone(t, e, id) // the old run's
		require.Eventually(t, func() bool {
			deliverAll(t, e) // the new run's start, refused while the old run closed
			return workflowRuns(t, e, workflows.JobWorkflowID(id)) == 2
		}, time.Minute, 200*time.Millisecond, "the new run never started")
		requireWorkflowDone(t, e, id)
		job = waitJob(t, e, id)
		require.Equal(t, vocab.JobSuccess, job["state"], job)
		require.EqualValues(t, 2, job["run"], job)
	})
}

// killHubWorkerAt runs the hub worker in a process of its own that kills
// itself at fault point (HUB_FAULT_POINT), starts a premigrate job of
// paths at site west, and returns the job's id once the process is dead,
// having reached point.
func killHubWorkerAt(t *testing.T, e *apitest.Env, point string, paths []string) int64 {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	proc := e.StartHubWorkerProcess("HUB_FAULT_POINT="+point, "HUB_FAULT_TRACE="+trace)
	id := startJob(t, e, "west", "premigrate", paths)
	require.Eventually(t, func() bool { return errors.Is(syscall.Kill(proc.Pid, 0), syscall.ESRCH) },
		time.Minute, 20*time.Millisecond, "the hub worker was not killed")
	reached, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(reached)), point)
	return id
}

// requireWorkflowDone waits for the latest run of job id's workflow to
// complete.
func requireWorkflowDone(t *testing.T, e *apitest.Env, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, e.Temporal.GetWorkflow(ctx, workflows.JobWorkflowID(id), "").Get(ctx, nil))
}

// requireBookkeepingIsLocal checks that job id's workflow ran its
// bookkeeping as local activities (in the hub worker, recorded as
// markers): every activity it scheduled through the server but its plan
// ran on a site's queue.
func requireBookkeepingIsLocal(t *testing.T, e *apitest.Env, id int64) {
	t.Helper()
	it := e.Temporal.GetWorkflowHistory(context.Background(), workflows.JobWorkflowID(id), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	local := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() != "LoadJobPlan" {
			require.NotEqual(t, workflows.HubTaskQueue, a.GetTaskQueue().GetName(), "%s ran through the hub's queue", a.GetActivityType().GetName())
		}
		if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
			local++
		}
	}
	require.NotZero(t, local, "no local activity recorded")
}
