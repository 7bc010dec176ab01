package hub_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

// TestJobS3Target runs premigrate, migrate and recall through an S3 target
// created with the API, its objects under its folder (a key prefix): its credentials are sealed in the database, cross
// Temporal sealed, and are opened by the site worker, which signs every
// request with them.
func TestJobS3Target(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		backend := s3mem.New()
		require.NoError(t, backend.CreateBucket("archive"))
		fake := gofakes3.New(backend).Server()
		var unsigned atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Authorization"), "Credential=AKIDHUB/") {
				unsigned.Add(1)
			}
			fake.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)

		e.StartHubWorker()
		s, err := models.EnsureSite(context.Background(), e.DB, "cloudy")
		require.NoError(t, err)
		root := t.TempDir()
		e.StartSiteWorker(worker.SiteConfig{Site: "cloudy", Queue: "default", Node: "n1", Root: root, HeartbeatInterval: time.Second})

		r := e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": "archive", "storage_type": "s3",
			"endpoint": srv.URL, "region": "us-east-1", "access_key_id": "AKIDHUB", "secret_access_key": "s3cr3t-value"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.NotContains(t, string(r.Body), "s3cr3t-value")
		r = e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "cloud", "storage_type": "s3",
			"local_file_regex": ".*", "bucket": "archive", "available_on_sites": []int64{s.ID}, "migration_target_folder": "tenant-a"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))

		files := makeTree(t, root, 200)
		job := runJob(t, e, "cloudy", "migrate", []string{"/data"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		require.Equal(t, false, job["has_failures"], job)
		for p, want := range files {
			// Under the target's folder, its key prefix (it was ignored
			// by the site, which wrote to the bucket's root).
			obj, err := backend.GetObject("archive", "tenant-a/"+site.ContentKey(sha256Hex(want)), nil)
			require.NoError(t, err, p)
			got, err := io.ReadAll(obj.Contents)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "object %s differs", p)
			fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
			require.NoError(t, err)
			require.Less(t, fi.Size(), int64(len(want)), "%s is a stub", p)
		}
		job = runJob(t, e, "cloudy", "recall", []string{"/data"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		requireSameTree(t, files, root)
		require.Zero(t, unsigned.Load(), "every S3 request was signed with the target's key")
	})
}
