package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobLiveProgress: a job of a few hundred files in one batch shows
// progress strictly between 0 and 100 while its step runs (in its
// progress answer and in the job itself), read from the
// step's heartbeat (files and bytes done of the batch), not only when the
// batch ends. The target is an S3 server that takes a little while over
// each upload, as a remote one does, so the batch lasts a few seconds.
func TestJobLiveProgress(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		root := slowS3Site(t, e, "live", 20*time.Millisecond)
		setBatchSize(t, e, "live", 1000)
		const n, size = 400, 4 << 10
		makeTreeSized(t, root, n, func(int) int { return size })
		id := startJob(t, e, "live", "premigrate", []string{"/data"})

		var mid map[string]any // a progress answer strictly between 0 and 100
		var seen, jobSeen []float64
		var jobMid float64 // the job's own progress strictly between 0 and 100
		deadline := time.Now().Add(3 * time.Minute)
		for (mid == nil || jobMid == 0) && time.Now().Before(deadline) {
			j := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil).Map()
			if v := j["progress"].(float64); jobMid == 0 && v > 0 && v < 100 {
				jobMid = v
			}
			jobSeen = append(jobSeen, j["progress"].(float64))
			r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/progress/", id), nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			p := r.Map()
			v := p["progress"].(float64)
			seen = append(seen, v)
			if mid == nil && v > 0 && v < 100 {
				mid = p
			}
			if vocab.JobFinished(p["state"].(string)) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		require.NotNil(t, mid, "no intermediate progress among %v", seen)
		live := mid["live"].(map[string]any)
		steps := live["steps"].([]any)
		require.NotEmpty(t, steps, "intermediate progress comes from a step in flight: %v", mid)
		st := steps[0].(map[string]any)
		require.Equal(t, "premigrate", st["step"])
		require.Equal(t, float64(n), st["files"])
		require.Equal(t, float64(n*size), st["bytes"])
		done := st["files_done"].(float64)
		require.Greater(t, done, 0.0)
		require.Less(t, done, float64(n))
		require.Equal(t, done, live["files_done"])
		require.InDelta(t, 100*done/n, mid["progress"], 0.01)
		require.Zero(t, mid["numprocessedfiles"], "the batch's task has not finished: the stored counters have not moved")
		require.Greater(t, jobMid, 0.0, "GET /jobs/{id}/ shows progress inside the batch: %v", jobSeen)
		require.Less(t, jobMid, 100.0)

		job := waitJob(t, e, id)
		require.Equal(t, "SUCCESS", job["state"], job)
		p := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/progress/", id), nil).Map()
		require.Equal(t, 100.0, p["progress"])
		require.Nil(t, p["live"])
	})
}

// slowS3Site makes a site whose only target is an S3 bucket served by
// gofakes3 behind a server that waits delay before each upload, and
// starts its worker; it returns the site's root.
func slowS3Site(t *testing.T, e *apitest.Env, name string, delay time.Duration) string {
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket(name))
	fake := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			time.Sleep(delay)
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s, err := models.EnsureSite(context.Background(), e.DB, name)
	require.NoError(t, err)
	root := t.TempDir()
	e.StartSiteWorker(worker.SiteConfig{Site: name, Queue: "default", Node: name + "-n1", Root: root, HeartbeatInterval: time.Second})
	r := e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": name, "storage_type": "s3",
		"endpoint": srv.URL, "region": "us-east-1", "access_key_id": "AKIDHUB", "secret_access_key": "s3cr3t-value"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	r = e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": name + "-s3", "storage_type": "s3",
		"local_file_regex": ".*", "bucket": name, "available_on_sites": []int64{s.ID}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	return root
}
