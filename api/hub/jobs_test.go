package hub_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

// jobSite is a site with a live site worker over a real directory and a
// filesystem external target.
type jobSite struct {
	e          *apitest.Env
	name       string
	root       string
	targetDir  string
	stopWorker func()
}

func newJobSite(t *testing.T, e *apitest.Env, name string) *jobSite { return newJobSiteB(t, e, name) }

func newJobSiteB(t testing.TB, e *apitest.Env, name string) *jobSite {
	ctx := context.Background()
	s, err := models.EnsureSite(ctx, e.DB, name)
	require.NoError(t, err)
	js := &jobSite{e: e, name: name, root: t.TempDir(), targetDir: t.TempDir()}
	tgt := &models.ExternalTarget{Name: name + "-fs", StorageType: "filesystem", LocalFileRegex: ".*", Enabled: true}
	tgt.MigrationTargetFolder = js.targetDir
	require.NoError(t, models.SaveExternalTarget(ctx, e.DB, tgt, []int64{s.ID}))
	js.startWorker()
	return js
}

func (js *jobSite) startWorker() {
	js.stopWorker = js.e.StartSiteWorker(worker.SiteConfig{Site: js.name, Queue: "default", Node: js.name + "-n1",
		Root: js.root, HeartbeatInterval: time.Second})
}

// makeTree writes n files of varied sizes in nested folders and returns
// their contents by API path.
func makeTree(t *testing.T, root string, n int) map[string][]byte {
	return makeTreeSized(t, root, n, func(i int) int { return 100 + (i*37)%5000 })
}

// makeTreeSized is makeTree with the size of file i chosen by size.
func makeTreeSized(t *testing.T, root string, n int, size func(i int) int) map[string][]byte {
	files := map[string][]byte{}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("/data/d%02d/e%d/f%04d.bin", i%17, i%3, i)
		b := make([]byte, size(i))
		_, _ = rand.Read(b)
		abs := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, b, 0o644))
		files[p] = b
	}
	return files
}

// runJob starts a workflow on paths and waits for the job to finish.
func runJob(t *testing.T, e *apitest.Env, site, workflow string, paths []string, fields map[string]any) map[string]any {
	t.Helper()
	r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": site, "workflow": workflow, "paths": paths, "fields": fields})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	return waitJob(t, e, int64(r.Map()["job"].(float64)))
}

func waitJob(t *testing.T, e *apitest.Env, id int64) map[string]any {
	t.Helper()
	var job map[string]any
	require.Eventually(t, func() bool {
		job = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil).Map()
		return vocab.JobFinished(job["state"].(string))
	}, 3*time.Minute, 100*time.Millisecond, "job %d did not finish", id)
	return job
}

func TestJobPremigrateMigrateRecall(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		files := makeTree(t, s.root, 1000)

		job := runJob(t, e, "east", "premigrate", []string{"/data"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, false, job["has_failures"])
		require.Equal(t, float64(1000), job["numfiles"])
		require.Equal(t, float64(1000), job["numprocessedfiles"])
		require.Equal(t, float64(100), job["progress"])
		for p, want := range files {
			got, err := os.ReadFile(targetObject(s.targetDir, want))
			require.NoError(t, err, p)
			require.True(t, bytes.Equal(want, got), "target copy of %s differs", p)
		}

		job = runJob(t, e, "east", "migrate", []string{"/data"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, float64(1000), job["numprocessedfiles"])
		for p, want := range files {
			fi, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(p)))
			require.NoError(t, err)
			require.Less(t, fi.Size(), int64(len(want)), "%s should be a stub", p)
		}
		// The file browser shows the migration status, from the site itself.
		r := e.AsAdmin(http.MethodGet, "/api/file/?site=east&path=/data/d00/e0&page_size=0", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		listing := r.Map()["results"].([]any)
		require.NotEmpty(t, listing)
		for _, f := range listing {
			fm := f.(map[string]any)
			require.Equal(t, "migrated", fm["status"], fm)
			require.Contains(t, fm["remote_locations"], "east-fs")
			require.Greater(t, fm["size"].(float64), fm["data_size"].(float64), "logical size kept, data released")
		}
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/file/?site=east&path=/nope", nil).Status)
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/file/?site=east&path=/../x", nil).Status)
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/file/?path=/", nil).Status)

		job = runJob(t, e, "east", "recall", []string{"/data"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		for p, want := range files {
			got, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(p)))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "recalled %s differs", p)
		}

		// Operators find the jobs in Temporal by the hub's search attributes.
		require.Eventually(t, func() bool {
			resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
				Query: `HubSite = "east" AND HubWorkflow = "recall" AND HubJobState = "SUCCESS"`})
			return err == nil && len(resp.GetExecutions()) == 1
		}, 30*time.Second, 200*time.Millisecond)

		// Job stats: one final record per path.
		n, err := e.DB.NewSelect().Model((*models.JobStat)(nil)).Where("job_id = ?", int64(job["id"].(float64))).Count(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(1000), n)
	})
}
