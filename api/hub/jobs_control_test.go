package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

func setBatchSize(t *testing.T, e *apitest.Env, site string, n int) {
	_, err := e.DB.NewUpdate().Model((*models.Site)(nil)).Set("file_batch_size = ?", n).Where("name = ?", site).Exec(context.Background())
	require.NoError(t, err)
}

func startJob(t *testing.T, e *apitest.Env, site, workflow string, paths []string) int64 {
	r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": site, "workflow": workflow, "paths": paths})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	return int64(r.Map()["job"].(float64))
}

func jobState(e *apitest.Env, id int64) map[string]any {
	return e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil).Map()
}

func requireTargetMatches(t *testing.T, s *jobSite, files map[string][]byte) {
	for p, want := range files {
		got, err := os.ReadFile(targetObject(s.targetDir, want))
		require.NoError(t, err, p)
		require.True(t, bytes.Equal(want, got), "target copy of %s differs", p)
	}
}

func TestJobPauseResume(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "west")
	// Small batches: the job spans 120 batches (and a continue-as-new), so
	// the pause lands mid-job even on a loaded machine.
	setBatchSize(t, e, "west", 5)
	const n = 600
	files := makeTree(t, s.root, n)
	id := startJob(t, e, "west", "premigrate", []string{"/data"})
	require.Eventually(t, func() bool { return jobState(e, id)["numprocessedfiles"].(float64) > 0 }, time.Minute, 10*time.Millisecond)

	r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/pause/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	if !assert.Eventually(t, func() bool { return jobState(e, id)["state"] == "PAUSED" }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("job never paused: %v\npending: %s", jobState(e, id), pendingActivities(t, e, id))
	}
	paused := jobState(e, id)["numprocessedfiles"].(float64)
	require.Less(t, paused, float64(n), "pause should land mid-job")
	// Paused: no new task is dispatched.
	require.Never(t, func() bool { return jobState(e, id)["numprocessedfiles"].(float64) != paused }, 2*time.Second, 100*time.Millisecond)
	// Resubmitting an unfinished job changes nothing.
	r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "PAUSED", r.Map()["state"])

	require.Equal(t, http.StatusAccepted, e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resume/", id), nil).Status)
	job := waitJob(t, e, id)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, float64(n), job["numprocessedfiles"])
	requireTargetMatches(t, s, files)
	apitest.RecordHistories(t, e.Temporal)

	// Controls of a finished job are refused clearly.
	for _, op := range []string{"pause", "resume", "cancel"} {
		require.Equal(t, http.StatusConflict, e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/%s/", id, op), nil).Status, op)
	}
	require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodPost, "/api/jobs/999/pause/", nil).Status)
}

func TestJobCancelThenResubmit(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "north")
		setBatchSize(t, e, "north", 10)
		// Enough batches that the job is still running when its cancel
		// comes (a job of 400 files could end first on a fast day).
		const n = 2000
		files := makeTree(t, s.root, n)
		id := startJob(t, e, "north", "premigrate", []string{"/data"})
		require.Eventually(t, func() bool { return jobState(e, id)["numprocessedfiles"].(float64) > 0 }, time.Minute, 20*time.Millisecond)

		cancelledAt := time.Now()
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		job := waitJob(t, e, id)
		require.Equal(t, "CANCELLED", job["state"], job)
		require.Less(t, time.Since(cancelledAt), 25*time.Second, "cancel lands within a heartbeat interval")
		done := job["numprocessedfiles"].(float64)
		require.Less(t, done, float64(n))
		require.Equal(t, float64(n), done+job["numcancelledfiles"].(float64), job)

		open, err := e.DB.NewSelect().Model((*models.Task)(nil)).Where("job_id = ? AND state IN (?)", id, []string{"STARTED", "PENDING"}).Count(context.Background())
		require.NoError(t, err)
		require.Zero(t, open, "no task left STARTED or PENDING")

		// Resubmit reruns exactly what was cancelled.
		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		job = waitJob(t, e, id)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, false, job["has_failures"], job)
		require.Equal(t, float64(n), job["numprocessedfiles"])
		var rerun int64
		require.NoError(t, e.DB.NewSelect().Model((*models.Task)(nil)).ColumnExpr("COALESCE(SUM(numpaths), 0)").
			Where("job_id = ? AND run = 2", id).Scan(context.Background(), &rerun))
		require.Equal(t, int64(n)-int64(done), rerun, "run 2 touched only the cancelled paths")
		requireTargetMatches(t, s, files)
		stats, err := e.DB.NewSelect().Model((*models.JobStat)(nil)).Where("job_id = ? AND state = 'SUCCESS'", id).Count(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(n), stats, "one final record per path")
		apitest.RecordHistories(t, e.Temporal)
	})
}

func TestJobFailuresThenResubmitOnlyFailures(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "south")
	files := makeTree(t, s.root, 120)
	// Only files under d0x/ have a target: the rest fail.
	_, err := e.DB.NewUpdate().Table("external_targets").Set("local_file_regex = ?", "^/data/d0").Where("1 = 1").Exec(context.Background())
	require.NoError(t, err)
	job := runJob(t, e, "south", "premigrate", []string{"/data"}, nil)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, true, job["has_failures"])
	failed := job["numfailedfiles"].(float64)
	require.Greater(t, failed, float64(0))
	require.Equal(t, float64(120), failed+job["numprocessedfiles"].(float64))

	_, err = e.DB.NewUpdate().Table("external_targets").Set("local_file_regex = ?", ".*").Where("1 = 1").Exec(context.Background())
	require.NoError(t, err)
	r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", int64(job["id"].(float64))), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	job = waitJob(t, e, int64(job["id"].(float64)))
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	require.Equal(t, float64(120), job["numprocessedfiles"])
	var rerun int64
	require.NoError(t, e.DB.NewSelect().Model((*models.Task)(nil)).ColumnExpr("COALESCE(SUM(numpaths), 0)").
		Where("job_id = ? AND run = 2", int64(job["id"].(float64))).Scan(context.Background(), &rerun))
	require.Equal(t, int64(failed), rerun, "the resubmit ran only the failed paths")
	requireTargetMatches(t, s, files)
}

func TestJobValidation(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	_, err := models.EnsureSite(context.Background(), e.DB, "v1")
	require.NoError(t, err)
	cases := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"workflow": "premigrate", "paths": []string{"/a"}}, "site"},
		{map[string]any{"site": "v1", "paths": []string{"/a"}}, "workflow"},
		{map[string]any{"site": "nope", "workflow": "premigrate", "paths": []string{"/a"}}, "site"},
		{map[string]any{"site": "v1", "workflow": "nope", "paths": []string{"/a"}}, "workflow"},
		{map[string]any{"site": "v1", "workflow": "premigrate"}, "paths"},
		{map[string]any{"site": "v1", "workflow": "premigrate", "paths": []string{"relative"}}, "paths[0]"},
		{map[string]any{"site": "v1", "workflow": "premigrate", "paths": []string{"/a/../../etc"}}, "paths[0]"},
		{map[string]any{"site": "v1", "workflow": "premigrate", "paths": []any{5}}, "paths[0]"},
		{map[string]any{"site": "v1", "workflow": "premigrate", "paths": []string{"/a"}, "discovery": "magic"}, "discovery"},
		{map[string]any{"site": "v1", "workflow": "send", "paths": []string{"/a"}}, "fields.destination_site"},
		{map[string]any{"site": "v1", "workflow": "premigrate", "paths": []string{"/a"}, "fields": map[string]any{"x": 1}}, "fields.x"},
		{map[string]any{"site": "v1", "workflow": "premigrate", "paths": []string{"/a"}, "queue": "bad queue"}, "queue"},
	}
	for _, tc := range cases {
		r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", tc.body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", tc.body, r.Body)
		require.Contains(t, r.Map(), tc.field, "%v: %s", tc.body, r.Body)
	}
	require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodPost, "/api/file/workflow/", "{").Status)
	// Disabled and schedule-only workflows are refused.
	_, err = e.DB.NewUpdate().Table("workflows").Set("enabled = ?", false).Where("name = 'recall'").Exec(context.Background())
	require.NoError(t, err)
	_, err = e.DB.NewUpdate().Table("workflows").Set("schedule_only = ?", true).Where("name = 'migrate'").Exec(context.Background())
	require.NoError(t, err)
	for _, wf := range []string{"recall", "migrate"} {
		r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "v1", "workflow": wf, "paths": []string{"/a"}})
		require.Equal(t, http.StatusBadRequest, r.Status, wf)
		require.Contains(t, r.Map(), "workflow")
	}
	// Older revision body: jobtype.
	r := e.AsAdmin(http.MethodPost, "/api/jobs/", map[string]any{"site": "v1", "paths": []string{"/a"}})
	require.Equal(t, http.StatusBadRequest, r.Status)
	require.Contains(t, r.Map(), "jobtype")
	r = e.AsAdmin(http.MethodPost, "/api/jobs/", map[string]any{"site": "v1", "jobtype": "nosuch", "paths": []string{"/a"}})
	require.Equal(t, http.StatusBadRequest, r.Status)
	require.Contains(t, r.Map(), "jobtype", "errors use the older body's names")
	require.NotContains(t, r.Map(), "workflow")
	// A plain user without add_job... Users have add_job; an Auditor does not.
	r = e.AsAdmin(http.MethodPost, "/api/groups/", map[string]any{"name": "NoJobs", "permissions": []string{"view_job"}})
	require.Equal(t, http.StatusCreated, r.Status)
	tok := e.CreateUser("nojobs", "NoJobs")
	require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/file/workflow/", apitest.Bearer(tok), map[string]any{}).Status)
}

// TestJobDuplicatePaths: a path given twice is one path of the job (on
// PostgreSQL a duplicate once made the bulk upsert fail forever).
func TestJobDuplicatePaths(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "dups")
		files := makeTree(t, s.root, 3)
		var p string
		for k := range files {
			p = k
		}
		r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "dups", "workflow": "premigrate",
			"discovery": "none", "paths": []string{p, p, p + "/", "/missing", "/missing"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		job := waitJob(t, e, int64(r.Map()["job"].(float64)))
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, float64(2), job["numfiles"], job)
		require.Equal(t, float64(1), job["numprocessedfiles"], job)
		require.Equal(t, float64(1), job["numfailedfiles"], job)
	})
}

// TestResubmitDiscoveryPages: a resubmit re-discovers the failed paths a
// page at a time; each page's discovery failures (paths gone since) are
// recorded under a task of their own.
func TestResubmitDiscoveryPages(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "pages")
	const n = 1200 // more than one page of failed paths
	files := makeTreeSized(t, s.root, n, func(int) int { return 16 })
	_, err := e.DB.NewUpdate().Table("external_targets").Set("local_file_regex = ?", "^$").Where("1 = 1").Exec(context.Background())
	require.NoError(t, err)
	job := runJob(t, e, "pages", "premigrate", []string{"/data"}, nil)
	require.Equal(t, float64(n), job["numfailedfiles"], job)
	id := int64(job["id"].(float64))

	gone := 0
	for p := range files {
		if gone%2 == 0 {
			require.NoError(t, os.Remove(filepath.Join(s.root, filepath.FromSlash(p))))
		}
		gone++
	}
	removed := (n + 1) / 2
	r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	waitJob(t, e, id)

	var tasks []models.Task
	require.NoError(t, e.DB.NewSelect().Model(&tasks).Where("job_id = ? AND run = 2 AND tasktype = 'discovery'", id).Order("task_id").Scan(context.Background()))
	require.Len(t, tasks, 2, "one discovery task per page with failures")
	require.Equal(t, fmt.Sprintf("job-%d-r2-discovery-p1", id), tasks[0].TaskID)
	require.Equal(t, fmt.Sprintf("job-%d-r2-discovery-p2", id), tasks[1].TaskID)
	require.Equal(t, int64(removed), tasks[0].NumPaths+tasks[1].NumPaths)
}

// pendingActivities describes a job workflow's pending activities, for
// failure messages.
func pendingActivities(t *testing.T, e *apitest.Env, id int64) string {
	d, err := e.Temporal.DescribeWorkflowExecution(context.Background(), workflows.JobWorkflowID(id), "")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, a := range d.GetPendingActivities() {
		out = append(out, fmt.Sprintf("%s %s attempt %d scheduled %s last started %s last heartbeat %s failure %v",
			a.GetActivityType().GetName(), a.GetState(), a.GetAttempt(), a.GetScheduledTime().AsTime(),
			a.GetLastStartedTime().AsTime(), a.GetLastHeartbeatTime().AsTime(), a.GetLastFailure().GetMessage()))
	}
	out = append(out, fmt.Sprintf("status %s, %d events", d.GetWorkflowExecutionInfo().GetStatus(), d.GetWorkflowExecutionInfo().GetHistoryLength()))
	it := e.Temporal.GetWorkflowHistory(context.Background(), workflows.JobWorkflowID(id), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var evs []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			break
		}
		line := ev.GetEventType().String()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			line += " " + a.GetActivityType().GetName()
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			line += " " + a.GetSignalName()
		}
		evs = append(evs, line)
	}
	if len(evs) > 40 {
		evs = evs[len(evs)-40:]
	}
	return strings.Join(append(out, evs...), "\n")
}

// TestUsersChangeOnlyTheirOwnJobs: a member of Users (change_job) pauses,
// resumes, cancels and resubmits its own jobs, never another user's or the
// system's (403); manage_job, which Administrators hold, changes every job.
// Before, anyone in Users could cancel anyone's job.
func TestUsersChangeOnlyTheirOwnJobs(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	ctx := context.Background()
	_, err := models.EnsureSite(ctx, e.DB, "west")
	require.NoError(t, err)
	alice := apitest.Bearer(e.CreateUser("alice"))
	bob := apitest.Bearer(e.CreateUser("bob"))
	olga := apitest.Bearer(e.CreateUser("olga", models.GroupAdministrators))
	r := e.Do(http.MethodPost, "/api/file/workflow/", alice, map[string]any{"site": "west", "workflow": "premigrate", "paths": []string{"/a"}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	mine := int64(r.Map()["job"].(float64))
	// Finished, so that a resubmit has something to do and no worker is needed.
	_, err = e.DB.NewUpdate().Model((*models.Job)(nil)).Set("state = ?", "FAILURE").Where("id = ?", mine).Exec(ctx)
	require.NoError(t, err)
	for _, action := range []string{"pause", "resume", "cancel", "resubmit"} {
		r := e.Do(http.MethodPost, fmt.Sprintf("/api/jobs/%d/%s/", mine, action), bob, nil)
		require.Equal(t, http.StatusForbidden, r.Status, "%s: %s", action, r.Body)
		require.Contains(t, r.Map()["detail"], "only your own jobs", action)
	}
	for who, auth := range map[string]string{"the owner": alice, "an administrator": olga} {
		r := e.Do(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", mine), auth, nil)
		require.NotEqual(t, http.StatusForbidden, r.Status, "%s: %s", who, r.Body)
	}
}
