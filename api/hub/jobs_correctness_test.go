package hub_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows"
)

// slowS3 is an S3 target whose PUTs take a while while slow is set, so a
// step is still running when the test acts; it notes when each PUT
// arrived.
type slowS3 struct {
	backend *s3mem.Backend
	slow    atomic.Bool
	mu      sync.Mutex
	puts    []time.Time
}

func newSlowS3(t *testing.T, bucket string) (*slowS3, string) {
	s := &slowS3{backend: s3mem.New()}
	require.NoError(t, s.backend.CreateBucket(bucket))
	fake := gofakes3.New(s.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			s.mu.Lock()
			s.puts = append(s.puts, time.Now())
			s.mu.Unlock()
			if s.slow.Load() {
				time.Sleep(200 * time.Millisecond)
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.slow.Store(true)
	return s, srv.URL
}

// arrivedAfter counts the PUTs that arrived after t.
func (s *slowS3) arrivedAfter(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.puts {
		if p.After(t) {
			n++
		}
	}
	return n
}

// TestJobCancelWaitsForSteps: a cancelled job is recorded CANCELLED only
// once its running step has stopped: no data reaches the target after
// the CANCELLED record, and a resubmit right after runs alone.
func TestJobCancelWaitsForSteps(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	s3, url := newSlowS3(t, "slow")
	e.StartHubWorker()
	s, err := models.EnsureSite(context.Background(), e.DB, "halt")
	require.NoError(t, err)
	root := t.TempDir()
	e.StartSiteWorker(worker.SiteConfig{Site: "halt", Queue: "default", Node: "n1", Root: root, HeartbeatInterval: time.Second})
	r := e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": "slow", "storage_type": "s3",
		"endpoint": url, "region": "us-east-1", "access_key_id": "AKIDHUB", "secret_access_key": "s3cr3t-value"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	r = e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "slow", "storage_type": "s3",
		"local_file_regex": ".*", "bucket": "slow", "available_on_sites": []int64{s.ID}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	// One batch whose step takes far longer than a heartbeat interval.
	setBatchSize(t, e, "halt", 1000)
	const n = 300
	files := makeTreeSized(t, root, n, func(i int) int { return 64 + i })

	id := startJob(t, e, "halt", "premigrate", []string{"/data"})
	// The step has sent its first heartbeat: the worker sends the next one,
	// which brings the cancellation back, only 0.8 heartbeat timeouts
	// later, while the step goes on.
	require.Eventually(t, func() bool { return stepHeartbeated(t, e, id) }, time.Minute, 20*time.Millisecond)
	r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	job := waitJob(t, e, id)
	require.Equal(t, "CANCELLED", job["state"], job)
	rec, err := models.GetJob(context.Background(), e.DB, id)
	require.NoError(t, err)
	require.NotNil(t, rec.Completed)
	// The step stopped before the job was recorded CANCELLED: nothing
	// more reaches the target.
	require.Never(t, func() bool { return s3.arrivedAfter(*rec.Completed) > 0 }, 3*time.Second, 50*time.Millisecond,
		"the step went on writing to the target after the job was recorded CANCELLED")
	open, err := e.DB.NewSelect().Model((*models.Task)(nil)).Where("job_id = ? AND state NOT IN (?, ?)", id, "CANCELLED", "SUCCESS").Count(context.Background())
	require.NoError(t, err)
	require.Zero(t, open, "the interrupted step's task is CANCELLED")

	s3.slow.Store(false)
	r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	job = waitJob(t, e, id)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	require.Equal(t, float64(n), job["numprocessedfiles"], job)
	for p, want := range files {
		obj, err := s3.backend.GetObject("slow", site.ContentKey(sha256Hex(want)), nil)
		require.NoError(t, err, p)
		got, err := io.ReadAll(obj.Contents)
		require.NoError(t, err)
		require.Equal(t, want, got, p)
	}
	apitest.RecordHistories(t, e.Temporal)
}

// TestJobLargePathList: a job naming more paths than Temporal takes in one
// payload (2 MB) starts and finishes: the paths stay in the database and
// reach the site's discovery a page at a time.
func TestJobLargePathList(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "many")
	files := makeTree(t, s.root, 3)
	const missing = 40000
	paths := make([]string, 0, missing+len(files))
	for i := 0; i < missing; i++ {
		p := fmt.Sprintf("/absent/%06d/", i)
		paths = append(paths, p+strings.Repeat("x", 60-len(p)))
	}
	for p := range files {
		paths = append(paths, p)
	}
	total := 0
	for _, p := range paths {
		total += len(p)
	}
	require.Greater(t, total, 2<<20, "more than Temporal's payload limit")

	job := runJob(t, e, "many", "premigrate", paths, nil)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, true, job["has_failures"], job)
	require.Equal(t, float64(len(files)), job["numprocessedfiles"], job)
	require.Equal(t, float64(missing), job["numfailedfiles"], job)
	require.Equal(t, float64(missing+len(files)), job["numfiles"], job)
	requireTargetMatches(t, s, files)
	id := int64(job["id"].(float64))
	r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/?job=%d&path=%s", id, paths[missing-1]), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	rows := r.Map()["results"].([]any)
	require.Len(t, rows, 1)
	require.Equal(t, "FAILURE", rows[0].(map[string]any)["state"])
	require.NotEmpty(t, rows[0].(map[string]any)["message"])
}

// TestJobResubmitAfterSiteRename: jobs keep their site by id. A failed
// job of a renamed site is resubmitted and runs on the site's new queue,
// and a paused job resumed after the rename finishes there.
func TestJobResubmitAfterSiteRename(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "before")
	setBatchSize(t, e, "before", 5)
	files := makeTree(t, s.root, 40)
	ctx := context.Background()
	_, err := e.DB.NewUpdate().Table("external_targets").Set("local_file_regex = ?", "^$").Where("1 = 1").Exec(ctx)
	require.NoError(t, err)
	failed := runJob(t, e, "before", "premigrate", []string{"/data"}, nil)
	require.Equal(t, "FAILURE", failed["state"], failed)
	_, err = e.DB.NewUpdate().Table("external_targets").Set("local_file_regex = ?", ".*").Where("1 = 1").Exec(ctx)
	require.NoError(t, err)

	// A job paused before any batch ran, to be resumed after the rename:
	// its discovery waits for the site worker until the pause has landed.
	s.stopWorker()
	paused := startJob(t, e, "before", "premigrate", []string{"/data/d01", "/data/d02"})
	r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/pause/", paused), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	s.startWorker()
	require.Eventually(t, func() bool { return jobState(e, paused)["state"] == "PAUSED" }, time.Minute, 20*time.Millisecond)
	require.Zero(t, jobState(e, paused)["numprocessedfiles"])

	site, err := models.GetSiteByName(ctx, e.DB, "before")
	require.NoError(t, err)
	r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/sites/%d/", site.ID), map[string]any{"name": "after"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	// The site's workers now serve the site under its new name.
	s.stopWorker()
	s.name = "after"
	s.startWorker()

	id := int64(failed["id"].(float64))
	j, err := models.GetJob(ctx, e.DB, id)
	require.NoError(t, err)
	js, err := models.GetJobSite(ctx, e.DB, j)
	require.NoError(t, err)
	require.Equal(t, "after", js.Name, "a job keeps its site by id")
	r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	job := waitJob(t, e, id)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	require.Equal(t, float64(len(files)), job["numprocessedfiles"], job)

	require.Equal(t, http.StatusAccepted, e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resume/", paused), nil).Status)
	job = waitJob(t, e, paused)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	require.Greater(t, job["numprocessedfiles"], float64(0), job)
	// The site's jobs are listed under its name now, as under the old one.
	for _, name := range []string{"after", "before"} {
		require.ElementsMatch(t, []int64{id, paused}, resultIDs(t, e.AsAdmin(http.MethodGet, "/api/jobs/?site="+name, nil)), name)
	}
	requireTargetMatches(t, s, files)
	apitest.RecordHistories(t, e.Temporal)
}

// TestJobMissingPathFailsAlone: a path missing at the site fails by itself,
// with its reason in the job stats, while the other paths of the job run;
// a job none of whose paths can run ends FAILURE with the reason on the
// job.
func TestJobMissingPathFailsAlone(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		stopHub := e.StartHubWorker()
		s := newJobSite(t, e, "gaps")
		files := makeTree(t, s.root, 2)
		paths := []string{"/data/nothing/here.bin"}
		for p := range files {
			paths = append(paths, p)
		}
		// A path through a symlink below the root is refused, per path,
		// like a missing one.
		require.NoError(t, os.Symlink(filepath.Join(s.root, "data"), filepath.Join(s.root, "link")))
		linked := "/link/" + strings.TrimPrefix(paths[1], "/data/")
		paths = append(paths, linked)

		job := runJob(t, e, "gaps", "premigrate", paths, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, true, job["has_failures"], job)
		require.Equal(t, float64(2), job["numprocessedfiles"], job)
		require.Equal(t, float64(2), job["numfailedfiles"], job)
		requireTargetMatches(t, s, files)
		id := int64(job["id"].(float64))
		for _, p := range []string{"/data/nothing/here.bin", linked} {
			r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/?job=%d&path=%s", id, p), nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			rows := r.Map()["results"].([]any)
			require.Len(t, rows, 1, p)
			row := rows[0].(map[string]any)
			require.Equal(t, "FAILURE", row["state"], p)
			require.NotEmpty(t, row["message"], p)
		}
		require.Empty(t, jobError(t, e, id), "a job that ran has no error")

		job = runJob(t, e, "gaps", "premigrate", []string{"/nowhere", linked}, nil)
		require.Equal(t, "FAILURE", job["state"], job)
		reason := jobError(t, e, int64(job["id"].(float64)))
		require.Contains(t, reason, "/nowhere")
		require.Contains(t, reason, "every path failed")

		// Nothing can run at all: the job's send destination is gone by the
		// time the job plans (the hub worker is stopped meanwhile, so the
		// plan cannot be made first and wait for the gone site's worker).
		_, err := models.EnsureSite(context.Background(), e.DB, "elsewhere")
		require.NoError(t, err)
		stopHub()
		r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "gaps", "workflow": "send",
			"paths": []string{"/data"}, "fields": map[string]any{"destination_site": "elsewhere"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		id = int64(r.Map()["job"].(float64))
		_, err = e.DB.NewDelete().Table("sites").Where("name = ?", "elsewhere").Exec(context.Background())
		require.NoError(t, err)
		e.StartHubWorker()
		job = waitJob(t, e, id)
		require.Equal(t, "FAILURE", job["state"], job)
		require.Contains(t, jobError(t, e, id), "elsewhere")
		apitest.RecordHistories(t, e.Temporal)
	})
}

// TestResubmitWalksAFolderThatFailed: a recursive job's folder that its
// first walk refused (missing: a volume not mounted yet) is walked by the
// resubmit once it is there. Taken as one exact path, the folder matched
// no rule of the job's files and the resubmit ended SUCCESS without them.
func TestResubmitWalksAFolderThatFailed(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "late")
		files := makeTree(t, s.root, 20)
		job := runJob(t, e, "late", "premigrate", []string{"/data", "/later"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, float64(1), job["numfailedfiles"], job)

		later := map[string][]byte{}
		for i := range 3 {
			p := fmt.Sprintf("/later/v/f%d.bin", i)
			later[p] = []byte(fmt.Sprintf("mounted late, file %d", i))
			abs := filepath.Join(s.root, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
			require.NoError(t, os.WriteFile(abs, later[p], 0o644))
		}
		id := int64(job["id"].(float64))
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		job = waitJob(t, e, id)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, false, job["has_failures"], job)
		requireTargetMatches(t, s, later)
		requireTargetMatches(t, s, files)
	})
}

// TestJobStartDeliveredAgain: a job's start delivered again once its run
// has ended (the hub may deliver a start twice: it crashed between
// starting the workflow and recording that it did) runs nothing and
// leaves the job as it was.
func TestJobStartDeliveredAgain(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "twice")
	makeTree(t, s.root, 20)
	job := runJob(t, e, "twice", "premigrate", []string{"/data"}, nil)
	require.Equal(t, "SUCCESS", job["state"], job)
	id := int64(job["id"].(float64))
	ctx := context.Background()
	before, err := models.GetJob(ctx, e.DB, id)
	require.NoError(t, err)
	tasks, err := e.DB.NewSelect().Model((*models.Task)(nil)).Where("job_id = ?", id).Count(ctx)
	require.NoError(t, err)

	// The run's workflow has closed (it cleans up after recording the
	// end); the start comes again.
	require.NoError(t, e.Temporal.GetWorkflow(ctx, workflows.JobWorkflowID(id), "").Get(ctx, nil))
	again, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.JobWorkflowID(id),
		TaskQueue: workflows.HubTaskQueue, WorkflowExecutionErrorWhenAlreadyStarted: true},
		workflows.JobWorkflowName, workflows.JobInput{JobID: id, Run: before.Run})
	require.NoError(t, err)
	require.NoError(t, again.Get(ctx, nil))
	after, err := models.GetJob(ctx, e.DB, id)
	require.NoError(t, err)
	require.Equal(t, before.State, after.State)
	require.Equal(t, before.Updated, after.Updated, "the job's record is untouched")
	require.Equal(t, before.Completed, after.Completed)
	n, err := e.DB.NewSelect().Model((*models.Task)(nil)).Where("job_id = ?", id).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, tasks, n, "no task ran")
	apitest.RecordHistories(t, e.Temporal)
}

// jobError is the error recorded on job id.
func jobError(t *testing.T, e *apitest.Env, id int64) string {
	var reason string
	require.NoError(t, e.DB.NewSelect().Table("jobs").Column("error").Where("id = ?", id).Scan(context.Background(), &reason))
	return reason
}

// stepHeartbeated reports whether job id's workflow has a RunStep in
// flight that has heartbeated.
func stepHeartbeated(t *testing.T, e *apitest.Env, id int64) bool {
	d, err := e.Temporal.DescribeWorkflowExecution(context.Background(), workflows.JobWorkflowID(id), "")
	require.NoError(t, err)
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == "RunStep" && a.GetLastHeartbeatTime() != nil {
			return true
		}
	}
	return false
}
