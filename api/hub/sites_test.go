package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

// requireStatus fails with the body when r has another status.
func requireStatus(t *testing.T, want int, r apitest.Response) {
	t.Helper()
	require.Equal(t, want, r.Status, string(r.Body))
}

// requireFieldError checks a 400 naming field.
func requireFieldError(t *testing.T, r apitest.Response, field string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
	require.Contains(t, r.Map(), field, string(r.Body))
}

// recordID is the id of the record in r's body.
func recordID(t *testing.T, r apitest.Response) int64 {
	t.Helper()
	id, ok := r.Map()["id"].(float64)
	require.True(t, ok, "no id in %s", r.Body)
	return int64(id)
}

// pathOf is the API path of a record.
func pathOf(collection string, id int64) string { return fmt.Sprintf("/api/%s/%d/", collection, id) }

// checkPermissions: a plain user (Users group) may read the collection and
// the record but gets 403 on every write.
func checkPermissions(t *testing.T, e *apitest.Env, user, collection string, id int64, body any) {
	t.Helper()
	auth := apitest.Bearer(e.CreateUser(user))
	requireStatus(t, http.StatusOK, e.Do(http.MethodGet, "/api/"+collection+"/", auth, nil))
	requireStatus(t, http.StatusOK, e.Do(http.MethodGet, pathOf(collection, id), auth, nil))
	requireStatus(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/"+collection+"/", auth, body))
	requireStatus(t, http.StatusForbidden, e.Do(http.MethodPatch, pathOf(collection, id), auth, body))
	requireStatus(t, http.StatusForbidden, e.Do(http.MethodDelete, pathOf(collection, id), auth, nil))
	requireStatus(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/"+collection+"/", "", nil))
}

func TestSitesCRUD(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{
			"name": "london", "shortcode": "LDN", "type": "on-premise", "timezone": "Europe/London",
			"public_url": "https://london.example.com", "bandwidth": 1000, "color": []int{10, 20, 30},
			"include": map[string]any{"paths": []string{"/a"}}, "file_batch_size": 500,
			"id": 999, "editable": "no", "url": "http://x/", // read only: ignored
		})
		requireStatus(t, http.StatusCreated, r)
		s := r.Map()
		id := recordID(t, r)
		require.NotEqual(t, int64(999), id)
		require.Equal(t, "london", s["name"])
		require.Equal(t, "london", s["label"], "label defaults to the name")
		require.Equal(t, "LDN", s["shortcode"])
		require.Equal(t, float64(500), s["file_batch_size"])
		require.Equal(t, float64(10), s["file_batch_gb"], "default")
		require.Equal(t, []any{float64(10), float64(20), float64(30)}, s["color"])
		require.Equal(t, true, s["editable"])
		require.Equal(t, []any{}, s["spaces"])
		require.True(t, strings.HasSuffix(s["url"].(string), pathOf("sites", id)))
		for _, f := range []string{"storage_search_url", "searchengine_url", "am_i_configured", "ready_to_configure",
			"addon_enabled", "directories_count", "files_count", "files_hydrated_count", "files_stubbed_count",
			"enable_auto_file_batch_sizing", "fs_iscan_buckets", "fs_iscan_threads", "lock_threshold", "exclude"} {
			require.Contains(t, s, f)
		}

		r = e.AsAdmin(http.MethodGet, pathOf("sites", id), nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, "Europe/London", r.Map()["timezone"])

		r = e.AsAdmin(http.MethodPatch, pathOf("sites", id), map[string]any{"label": "London DC", "addon_enabled": true,
			"exclude": map[string]any{"paths": []string{"/tmp"}}})
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, "London DC", r.Map()["label"])
		require.Equal(t, "london", r.Map()["name"], "unchanged")
		require.Equal(t, true, r.Map()["addon_enabled"])

		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "paris"}))
		r = e.AsAdmin(http.MethodGet, "/api/sites/", nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(2), r.Map()["count"])
		require.Equal(t, "london", r.Map()["results"].([]any)[0].(map[string]any)["name"])

		checkPermissions(t, e, "plain", "sites", id, map[string]any{"name": "x"})
		auth := apitest.Bearer(e.Login("plain", "password-plain"))
		require.Equal(t, false, e.Do(http.MethodGet, pathOf("sites", id), auth, nil).Map()["editable"])
		requireStatus(t, http.StatusForbidden, e.Do(http.MethodPost, pathOf("sites", id)+"refresh/", auth, nil))

		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("sites", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("sites", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, pathOf("sites", id), map[string]any{}))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("sites", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/sites/abc/", nil))
	})
}

func TestSiteValidation(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "taken"}))
		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"name missing", map[string]any{"label": "x"}, "name"},
			{"name pattern", map[string]any{"name": "bad name!"}, "name"},
			{"name too long", map[string]any{"name": strings.Repeat("a", 151)}, "name"},
			{"name taken", map[string]any{"name": "taken"}, "name"},
			{"name wrong type", map[string]any{"name": 12}, "name"},
			{"bandwidth wrong type", map[string]any{"name": "a", "bandwidth": "fast"}, "bandwidth"},
			{"negative count", map[string]any{"name": "a", "file_batch_size": -1}, "file_batch_size"},
			{"bad timezone", map[string]any{"name": "a", "timezone": "Mars/Olympus"}, "timezone"},
			{"bad url", map[string]any{"name": "a", "public_url": "not a url"}, "public_url"},
			{"color range", map[string]any{"name": "a", "color": []int{300}}, "color"},
			{"color wrong type", map[string]any{"name": "a", "color": "red"}, "color"},
			{"include wrong type", map[string]any{"name": "a", "include": []int{1}}, "include"},
			{"unknown space", map[string]any{"name": "a", "spaces": []string{"nope"}}, "spaces"},
			{"spaces wrong type", map[string]any{"name": "a", "spaces": []int{1}}, "spaces"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/sites/", tc.body), tc.field)
			})
		}
		r := e.AsAdmin(http.MethodGet, "/api/sites/", nil)
		require.Equal(t, float64(1), r.Map()["count"], "no failed create left a record")
	})
}

// TestSiteSpacesAndDelete: spaces on input are names, on output objects;
// a site holding spaces cannot be deleted.
func TestSiteSpacesAndDelete(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		root := t.TempDir()
		e.StartSiteWorker(worker.SiteConfig{Site: "east", Queue: "default", Node: "n1", Root: root, HeartbeatInterval: time.Second})
		siteID := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "east"}))
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "proj", "mountpoint": "/spaces/proj"})
		requireStatus(t, http.StatusCreated, r)
		spaceID := recordID(t, r)

		r = e.AsAdmin(http.MethodPatch, pathOf("sites", siteID), map[string]any{"spaces": []string{"proj"}})
		requireStatus(t, http.StatusOK, r)
		spaces := r.Map()["spaces"].([]any)
		require.Len(t, spaces, 1)
		sp := spaces[0].(map[string]any)
		require.Equal(t, "proj", sp["name"])
		require.Equal(t, float64(spaceID), sp["id"])
		require.True(t, strings.HasSuffix(sp["url"].(string), pathOf("spaces", spaceID)))
		// Linking the site created the space's directory there.
		require.Eventually(t, func() bool {
			fi, err := os.Stat(filepath.Join(root, "spaces", "proj"))
			return err == nil && fi.IsDir()
		}, 30*time.Second, 100*time.Millisecond)

		r = e.AsAdmin(http.MethodDelete, pathOf("sites", siteID), nil)
		requireStatus(t, http.StatusConflict, r)
		require.Contains(t, r.Map()["detail"], "spaces")

		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("sites", siteID), map[string]any{"spaces": []string{}}))
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(root, "spaces", "proj"))
			return os.IsNotExist(err)
		}, 30*time.Second, 100*time.Millisecond, "the empty directory goes with the link")
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("sites", siteID), nil))
	})
}

// TestSiteRefreshAndHealth: refresh asks the site's real worker for counts
// and pools; /sites/{id}/health/ reports its node and queue.
func TestSiteRefreshAndHealth(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		root := t.TempDir()
		for _, f := range []string{"a/one.txt", "a/b/two.txt", "c/three.txt"} {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("data of "+f), 0o644))
		}
		siteID := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "west"}))

		// No worker yet: the refresh cannot finish within the wait.
		e.API.WorkflowWait = 500 * time.Millisecond
		r := e.AsAdmin(http.MethodPost, pathOf("sites", siteID)+"refresh/", nil)
		requireStatus(t, http.StatusAccepted, r)
		require.Equal(t, "site-refresh-west", r.Map()["task_id"])

		e.StartSiteWorker(worker.SiteConfig{Site: "west", Queue: "default", Node: "n1", Root: root, HeartbeatInterval: time.Second})
		e.API.WorkflowWait = 30 * time.Second
		r = e.AsAdmin(http.MethodPost, pathOf("sites", siteID)+"refresh/", nil)
		requireStatus(t, http.StatusOK, r)
		s := r.Map()
		require.Equal(t, float64(3), s["directories_count"], "a, a/b, c")
		require.Equal(t, float64(3), s["files_count"])
		require.Equal(t, float64(3), s["files_hydrated_count"])
		require.Equal(t, float64(0), s["files_stubbed_count"])

		r = e.AsAdmin(http.MethodGet, "/api/storagepools/?site="+fmt.Sprint(siteID), nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(1), r.Map()["count"])
		pool := r.Map()["results"].([]any)[0].(map[string]any)
		require.Equal(t, "system", pool["name"])
		require.Equal(t, true, pool["is_default"])
		require.Equal(t, float64(siteID), pool["site"])
		require.NotEmpty(t, pool["filesystem"])
		require.Greater(t, pool["capacity"].(float64), float64(0))
		require.GreaterOrEqual(t, pool["capacity"].(float64), pool["used_space"].(float64))

		r = e.AsAdmin(http.MethodGet, "/api/servers/?site="+fmt.Sprint(siteID), nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(1), r.Map()["count"])
		srv := r.Map()["results"].([]any)[0].(map[string]any)
		require.Equal(t, "n1", srv["name"])
		require.NotEmpty(t, srv["list_of_interfaces"])

		// A refresh after a migration counts the stub.
		ctx := context.Background()
		sr, err := site.NewRoot(root)
		require.NoError(t, err)
		target, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: t.TempDir()})
		require.NoError(t, err)
		res, err := site.Migrate(ctx, sr, []string{"/c/three.txt"}, target, "t1", site.StepOptions{})
		require.NoError(t, err)
		require.Len(t, res, 1)
		r = e.AsAdmin(http.MethodPost, pathOf("sites", siteID)+"refresh/", nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(1), r.Map()["files_stubbed_count"])
		require.Equal(t, float64(2), r.Map()["files_hydrated_count"])

		require.Eventually(t, func() bool {
			return e.AsAdmin(http.MethodGet, pathOf("sites", siteID)+"health/", nil).Map()["health"] == "ok"
		}, 30*time.Second, 100*time.Millisecond)
		h := e.AsAdmin(http.MethodGet, pathOf("sites", siteID)+"health/", nil).Map()
		require.Equal(t, "west", h["name"])
		require.Equal(t, "west", h["site"])
		require.Equal(t, float64(siteID), h["id"])
		require.NotNil(t, h["refreshed_at"])
		node := h["nodes"].([]any)[0].(map[string]any)
		require.Equal(t, "n1", node["name"])
		require.Equal(t, true, node["online"])
		require.Equal(t, true, h["queues"].([]any)[0].(map[string]any)["online"])
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/sites/9999/health/", nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPost, "/api/sites/9999/refresh/", nil))

		plain := apitest.Bearer(e.CreateUser("viewer"))
		requireStatus(t, http.StatusOK, e.Do(http.MethodGet, pathOf("sites", siteID)+"health/", plain, nil))

		// The site row holds the counts, not just the answer.
		got, err := models.GetSite(ctx, e.DB, siteID)
		require.NoError(t, err)
		require.Equal(t, int64(3), got.FilesCount)
	})
}
