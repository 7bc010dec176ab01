package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobSurvivesSiteWorkerCrash runs the site worker as its own process,
// which kills itself with SIGKILL (no chance to clean up, like a crashed
// machine) at a fault point inside a running step, after the 75th file's
// record; a new worker then takes over: the job finishes with every file
// done exactly once.
func TestJobSurvivesSiteWorkerCrash(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "crashy")
	s.stopWorker() // this test runs its site workers as processes
	cfg := worker.SiteConfig{Site: "crashy", Queue: "default", Node: "crashy-n1", Root: s.root, HeartbeatInterval: time.Second}
	proc := e.StartSiteWorkerProcess(cfg, "HUB_FAULT_POINT=premigrate.recorded@75")
	setBatchSize(t, e, "crashy", 50)
	files := makeTreeSized(t, s.root, 600, func(i int) int { return 64<<10 + i*97 })
	id := startJob(t, e, "crashy", "premigrate", []string{"/data"})
	require.Eventually(t, func() bool { return proc.Signal(syscall.Signal(0)) != nil }, time.Minute, 5*time.Millisecond,
		"the worker reaches its fault point and dies")
	before := jobState(e, id)["numprocessedfiles"].(float64)
	require.Less(t, before, float64(600), "the crash should land mid-job")
	e.StartSiteWorkerProcess(cfg)

	job := waitJob(t, e, id)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	require.Equal(t, float64(600), job["numprocessedfiles"])
	requireTargetMatches(t, s, files)
	n, err := e.DB.NewSelect().Model((*models.JobStat)(nil)).Where("job_id = ?", id).Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(600), n, "one final record per path")
	// Nothing is duplicated on the target either.
	var onTarget int
	require.NoError(t, filepath.WalkDir(filepath.Join(s.targetDir, "objects"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			onTarget++
		}
		return err
	}))
	require.Equal(t, 600, onTarget)
	require.Positive(t, activityRetries(t, e, id), "the killed worker's step ran again on the new one")
}

// TestJobHistoryStaysBounded runs a 100,000-path job and checks that no
// run of its workflow comes near Temporal's history limits.
func TestJobHistoryStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 files; skipped only with -short")
	}
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "big")
	const n = 100_000
	for i := 0; i < n; i++ {
		dir := filepath.Join(s.root, "big", fmt.Sprintf("d%03d", i%500))
		if i < 500 {
			require.NoError(t, os.MkdirAll(dir, 0o755))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d", i)), nil, 0o644))
	}
	// delete is the cheapest real step: the test is about the engine.
	r := e.AsAdmin(http.MethodPost, "/api/workflows/", map[string]any{"name": "purge", "label": "Purge", "discovery": "recursive",
		"filter_rules": []any{map[string]any{"type": "file", "state": "any", "action": []any{map[string]any{"name": "delete"}}}}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	id := startJob(t, e, "big", "purge", []string{"/big"})
	var job map[string]any
	require.Eventually(t, func() bool {
		job = jobState(e, id)
		return vocab.JobFinished(job["state"].(string))
	}, 10*time.Minute, time.Second)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, float64(n), job["numprocessedfiles"])

	ctx := context.Background()
	runs := jobRuns(t, e, id)
	require.Greater(t, len(runs), 1, "a job this size continues as new")
	for _, run := range runs {
		d, err := e.Temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(id), run)
		require.NoError(t, err)
		require.Less(t, d.GetWorkflowExecutionInfo().GetHistoryLength(), int64(10240), "run %s", run)
		t.Logf("run %s: %d events", run, d.GetWorkflowExecutionInfo().GetHistoryLength())
	}
}

// jobRuns lists the run ids of a job's workflow, oldest first.
func jobRuns(t *testing.T, e *apitest.Env, id int64) []string {
	var runs []string
	resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflows.JobWorkflowID(id))})
	require.NoError(t, err)
	for _, ex := range resp.GetExecutions() {
		runs = append([]string{ex.GetExecution().GetRunId()}, runs...)
	}
	return runs
}

// activityRetries counts the activity attempts of a job's workflow that
// timed out or failed and were retried, over all its runs.
func activityRetries(t *testing.T, e *apitest.Env, id int64) (retried int) {
	for _, run := range jobRuns(t, e, id) {
		it := e.Temporal.GetWorkflowHistory(context.Background(), workflows.JobWorkflowID(id), run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
				retried++
			}
		}
	}
	return retried
}
