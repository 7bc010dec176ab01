package hub_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// TestConfigurationBounds: every integer of the configuration has a
// documented range (docs/input-limits.md); 2^63-1 and one past the range
// are 400s naming the field, the ends of the range are accepted.
func TestConfigurationBounds(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	const day, year = 86400, 365 * 86400
	for field, b := range map[string][2]int64{
		"analytics_timeout": {1, day}, "health_timeout": {1, 3600}, "idp_jwks_timeout": {1, 30 * day},
		"node_health_last_heartbeat_interval": {1, day}, "snapdiff_stream_timeout": {1, day},
		"snapshot_create_delete_retry_timeout": {1, day}, "stat_refresh_period": {1, 30 * day},
		"stat_timeout": {1, 3600}, "task_invalidation_timeout": {1, 525600}, "maximum_external_results": {1, 100000},
		"search_max_results": {1, 100000}, "db_backup_retain_versions": {1, 1000}, "jobs_ttl": {0, 36500},
		"search_result_ttl": {0, 36500}, "notprogressed_job_threshold": {0, year}, "notstarted_job_threshold": {0, year},
		"initial_uid": {0, math.MaxInt32}, "initial_gid": {0, math.MaxInt32},
	} {
		for _, bad := range []int64{math.MaxInt64, b[1] + 1, b[0] - 1, math.MinInt64} {
			r := e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{field: bad})
			require.Equal(t, http.StatusBadRequest, r.Status, "%s=%d: %s", field, bad, r.Body)
			require.Contains(t, r.Map(), field, "%s=%d", field, bad)
		}
		for _, ok := range b {
			r := e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{field: ok})
			require.Equal(t, http.StatusOK, r.Status, "%s=%d: %s", field, ok, r.Body)
		}
	}
	for _, bad := range []float64{1e308, 86401, -1} {
		r := e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"orchestrator_task_timeout": bad})
		require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", bad, r.Body)
	}
}

// TestTextLimits: names, labels, descriptions and paths of 1 MiB are
// refused with a 400 naming the field, on every kind of record; text
// within the limits is stored as sent.
func TestTextLimits(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		mib := strings.Repeat("x", 1<<20)
		for _, tc := range []struct {
			method, path string
			body         map[string]any
			field        string
		}{
			{http.MethodPost, "/api/sites/", map[string]any{"name": "s1", "label": mib}, "label"},
			{http.MethodPost, "/api/sites/", map[string]any{"name": strings.Repeat("n", 151)}, "name"},
			{http.MethodPost, "/api/sites/", map[string]any{"name": "s1", "label": strings.Repeat("l", web.MaxLabelLen+1)}, "label"},
			{http.MethodPost, "/api/sites/", map[string]any{"name": "s1", "include": map[string]any{"patterns": []any{mib}}}, "include.patterns[0]"},
			{http.MethodPost, "/api/spaces/", map[string]any{"name": "sp", "mountpoint": "/" + mib}, "mountpoint"},
			{http.MethodPost, "/api/users/", map[string]any{"username": "u1", "password": "pw-Secret-123", "first_name": mib}, "first_name"},
			{http.MethodPost, "/api/datastores/", map[string]any{"name": "d", "type": "nfs", "description": mib}, "description"},
			{http.MethodPost, "/api/workflows/", map[string]any{"name": "w", "label": mib}, "label"},
			{http.MethodPost, "/api/file/workflow/", map[string]any{"site": "s", "workflow": "premigrate", "paths": []any{"/a", "/" + mib}}, "paths[1]"},
		} {
			r := e.AsAdmin(tc.method, tc.path, tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s %s: %.300s", tc.method, tc.path, r.Body)
			require.Contains(t, r.Map(), tc.field, "%s %s: %.300s", tc.method, tc.path, r.Body)
			require.Less(t, len(r.Body), 1000, "the answer does not echo the value")
		}
		label := strings.Repeat("é", web.MaxLabelLen)
		r := e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "s1", "label": label})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, label, r.Map()["label"])
	})
}

// TestInvalidUTF8Refused: invalid UTF-8 (or a \u escape of half a
// surrogate pair) in a body, a query or a path is a 400, never stored or
// looked up with U+FFFD in its place.
func TestInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		for _, body := range []string{"{\"name\": \"s1\", \"label\": \"a\xffb\"}", `{"name": "s1", "label": "a\ud800"}`} {
			r := e.Do(http.MethodPost, "/api/sites/", apitest.Bearer(e.Admin), body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", body, r.Body)
		}
		n, err := e.DB.NewSelect().Model((*models.Site)(nil)).Count(context.Background())
		require.NoError(t, err)
		require.Zero(t, n, "nothing stored")
		for _, target := range []string{"/api/sites/?name=%FF", "/api/jobs/?state=%C3", "/api/users/%FF/", "/api/sit%FFes/"} {
			r := e.Do(http.MethodGet, target, apitest.Bearer(e.Admin), nil)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", target, r.Body)
		}
		r := e.Do(http.MethodGet, "/api/users/%C3%A9t%C3%A9/", apitest.Bearer(e.Admin), nil)
		require.Equal(t, http.StatusNotFound, r.Status, "valid UTF-8 is looked up: %s", r.Body)
	})
}

// TestJobQueueMustBeKnown: a job's queue is default or a queue the site's
// workers reported in a heartbeat; anything else is a 400 at once, not a
// job that waits for a worker that never comes (or whose workflow cannot
// even schedule its first task).
func TestJobQueueMustBeKnown(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	ctx := context.Background()
	site, err := models.EnsureSite(ctx, e.DB, "q1")
	require.NoError(t, err)
	require.NoError(t, models.RecordHeartbeat(ctx, e.DB, models.Heartbeat{Site: site.Name, Node: "n1", Queue: "gpu", At: time.Now().UTC()}))
	job := func(queue any) apitest.Response {
		return e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "q1", "workflow": "premigrate",
			"paths": []any{"/d"}, "queue": queue})
	}
	for _, bad := range []string{"abc", strings.Repeat("q", 1<<20), strings.Repeat("q", web.MaxNameLen+1), "bad queue"} {
		r := job(bad)
		require.Equal(t, http.StatusBadRequest, r.Status, "%.40q: %.300s", bad, r.Body)
		require.Contains(t, r.Map(), "queue", "%.300s", r.Body)
	}
	// A queue of another site is not this site's.
	_, err = models.EnsureSite(ctx, e.DB, "q2")
	require.NoError(t, err)
	require.NoError(t, models.RecordHeartbeat(ctx, e.DB, models.Heartbeat{Site: "q2", Node: "n2", Queue: "tape", At: time.Now().UTC()}))
	require.Equal(t, http.StatusBadRequest, job("tape").Status)
	n, err := e.DB.NewSelect().Model((*models.Job)(nil)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no job was stored")
	for _, good := range []any{"default", "gpu", nil} {
		r := job(good)
		require.Equal(t, http.StatusCreated, r.Status, "%v: %s", good, r.Body)
	}
	// The destination queue of a send is a queue of the destination site.
	send := func(queue string) apitest.Response {
		return e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "q1", "workflow": "send",
			"paths": []any{"/d"}, "fields": map[string]any{"destination_site": "q2", "destination_queue": queue}})
	}
	for _, bad := range []string{"gpu", "nope", strings.Repeat("q", 2000)} {
		r := send(bad)
		require.Equal(t, http.StatusBadRequest, r.Status, "%.40q: %.300s", bad, r.Body)
		require.Contains(t, r.Map(), "fields.destination_queue", "%.300s", r.Body)
	}
	require.Equal(t, http.StatusCreated, send("tape").Status)
}

// TestStuckJobCancelAndDelete: a job whose workflow cannot make progress
// (here its queue, stored by an older hub, is too long for Temporal, so
// every workflow task fails) is still cancelled and deleted: the hub ends
// the workflow itself and records CANCELLED.
func TestStuckJobCancelAndDelete(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	ctx := context.Background()
	site, err := models.EnsureSite(ctx, e.DB, "stuck")
	require.NoError(t, err)
	wf, err := models.GetWorkflowByName(ctx, e.DB, "premigrate")
	require.NoError(t, err)
	start := func() int64 {
		j := &models.Job{Workflow: wf.Name, Site: site.Name, SiteID: site.ID, Queue: strings.Repeat("q", 2000),
			Paths: []string{"/d"}, Fields: map[string]any{}, Definition: models.JobDefinition{Name: wf.Name, Discovery: "recursive"},
			OwnerType: models.OwnerSystem}
		require.NoError(t, models.CreateJob(ctx, e.DB, j))
		_, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.JobWorkflowID(j.ID),
			TaskQueue: workflows.HubTaskQueue}, workflows.JobWorkflowName, workflows.JobInput{JobID: j.ID})
		require.NoError(t, err)
		// Stuck: the workflow task that would schedule discovery keeps failing.
		require.Eventually(t, func() bool {
			d, err := e.Temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(j.ID), "")
			return err == nil && d.GetPendingWorkflowTask().GetAttempt() >= 3
		}, time.Minute, 50*time.Millisecond)
		return j.ID
	}
	closed := func(id int64) bool {
		d, err := e.Temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(id), "")
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}

	// Cancel ends it at once; DELETE then removes it. Which batches the
	// workflow had yet to run went with it: a resubmit discovers the job
	// again, not only its failed paths (which would call it done).
	id := start()
	walked := true
	require.NoError(t, models.UpdateJob(ctx, e.DB, id, models.JobUpdate{DirWalkComplete: &walked}))
	r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return jobState(e, id)["state"] == vocab.JobCancelled }, 30*time.Second, 50*time.Millisecond)
	require.True(t, closed(id), "the workflow is ended")
	ended, err := models.GetJob(ctx, e.DB, id)
	require.NoError(t, err)
	require.False(t, ended.DirWalkComplete, "a resubmit discovers the job again")
	require.Empty(t, ended.Leftover)
	r = e.AsAdmin(http.MethodDelete, fmt.Sprintf("/api/jobs/%d/", id), nil)
	require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
	require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil).Status)

	// A job left CANCELLING (the cancel request reached a workflow that
	// never acted on it) is deleted too: DELETE ends the workflow.
	id = start()
	require.NoError(t, e.Temporal.CancelWorkflow(ctx, workflows.JobWorkflowID(id), ""))
	require.NoError(t, models.MarkCancelling(ctx, e.DB, id))
	r = e.AsAdmin(http.MethodDelete, fmt.Sprintf("/api/jobs/%d/", id), nil)
	require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
	require.True(t, closed(id), "the workflow is ended")
	require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil).Status)
}

// TestBrowseSymlinkLeavingRoot: browsing a symlink that leaves the site
// root answers as its sub-paths do (404), fast, and no answer of the file
// browser carries Temporal's wording.
func TestBrowseSymlinkLeavingRoot(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	ctx := context.Background()
	_, err := models.EnsureSite(ctx, e.DB, "b1")
	require.NoError(t, err)
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "out")))
	require.NoError(t, os.Symlink("../../../../../../../../etc", filepath.Join(root, "rel")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "spaces", "sp"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "spaces", "sp", "out")))
	e.StartSiteWorker(worker.SiteConfig{Site: "b1", Queue: "default", Node: "n", Root: root, HeartbeatInterval: time.Second})
	r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "sp", "mountpoint": "/spaces/sp",
		"sites": []any{map[string]any{"name": "b1", "label": "B1"}}})
	require.Less(t, r.Status, 300, string(r.Body))
	sp := int64(r.Map()["id"].(float64))

	internals := []string{"workflow", "activity", "runID", "RunID", "scheduledEventID", "ApplicationError", "retryable", "Temporal"}
	for _, target := range []string{"/api/file/?site=b1&path=/out", "/api/file/?site=b1&path=/out/secret",
		"/api/file/?site=b1&path=/rel", "/api/file/?site=b1&path=/rel/passwd",
		fmt.Sprintf("/api/spaces/%d/files/?path=/out&raise_exception=true", sp),
		fmt.Sprintf("/api/spaces/%d/files/?path=/out/secret&raise_exception=true", sp)} {
		begin := time.Now()
		r := e.AsAdmin(http.MethodGet, target, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "%s: %s", target, r.Body)
		require.Less(t, time.Since(begin), 10*time.Second, target)
		for _, word := range internals {
			require.NotContains(t, string(r.Body), word, "%s: %s", target, r.Body)
		}
	}
	// The listing of the root shows the link, and never what it points to.
	r = e.AsAdmin(http.MethodGet, "/api/file/?site=b1&path=/", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.NotContains(t, string(r.Body), "secret")
	// Without raise_exception the space listing reports the error per site, in the same words.
	r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/files/?path=/out", sp), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	for _, word := range internals {
		require.NotContains(t, string(r.Body), word, string(r.Body))
	}
}

// TestNoTemporalWordingInRecordedErrors: the error a workflow recorded on
// a task or a settings task, which the step's activity error carries with
// Temporal's ids and types, is shown with the messages alone.
func TestNoTemporalWordingInRecordedErrors(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	ctx := context.Background()
	site, err := models.EnsureSite(ctx, e.DB, "w1")
	require.NoError(t, err)
	j := &models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: "default", Paths: []string{"/d"},
		Fields: map[string]any{}, OwnerType: models.OwnerSystem}
	require.NoError(t, models.CreateJob(ctx, e.DB, j))
	raw := "activity error (type: RunStep, scheduledEventID: 12, startedEventID: 13, identity: 77@host@): " +
		"disk full (type: *fs.PathError, retryable: true)"
	task := &models.Task{JobID: j.ID, Site: site.Name, Queue: "default", TaskType: "premigrate", TaskID: "job-1-t", State: vocab.TaskStarted}
	require.NoError(t, models.CreateTask(ctx, e.DB, task))
	require.NoError(t, models.FinishTask(ctx, e.DB, task.ID, vocab.TaskError, map[string]any{"succeeded": 0, "error": raw}))
	r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/%d/", task.ID), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "disk full", r.Map()["result"].(map[string]any)["error"])

	st := &models.SettingsTask{TaskType: models.SettingsTaskApply, Site: site.Name, Request: []byte(`{}`)}
	require.NoError(t, models.CreateSettingsTask(ctx, e.DB, st))
	require.NoError(t, models.FinishSettingsTask(ctx, e.DB, st.ID, vocab.TaskFailure, []byte(`{"error": "`+raw+`"}`)))
	r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/settingstasks/%d/", st.ID), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "disk full", r.Map()["results"].(map[string]any)["error"])
}
