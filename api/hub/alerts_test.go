package hub_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

func TestAlerts(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		day := time.Date(2026, 3, 14, 9, 30, 0, 123456000, time.UTC)
		raise := func(a models.Alert) int64 {
			got, err := models.RaiseAlert(ctx, e.DB, a)
			require.NoError(t, err)
			return got.ID
		}
		disk := raise(models.Alert{Name: "disk_full", Node: "n1", Queue: "default", Severity: models.SeverityCritical,
			Site: "site1", Summary: "Pool TANK is 99% full", Timestamp: day})
		raise(models.Alert{Name: "job_failed", Node: "n2", Severity: models.SeverityError, Site: "site2",
			Summary: "Job 7 failed", Timestamp: day.Add(26 * time.Hour)})
		raise(models.Alert{Name: "node_offline", Node: "n1", Severity: models.SeverityWarning, Site: "site1",
			Summary: "no heartbeat", Suppressed: true, Timestamp: day.Add(-time.Hour)})
		_, err := models.RaiseAlert(ctx, e.DB, models.Alert{Name: "x", Severity: "apocalyptic"})
		require.Error(t, err)
		_, err = models.RaiseAlert(ctx, e.DB, models.Alert{Severity: models.SeverityInfo})
		require.Error(t, err)

		r := e.AsAdmin(http.MethodGet, "/api/alerts/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		list := r.JSON().([]any)
		require.Len(t, list, 3, "bare array")
		first := list[0].(map[string]any)
		require.Equal(t, "job_failed", first["name"], "newest first")
		for _, k := range []string{"id", "name", "node", "queue", "severity", "site", "summary", "suppressed", "timestamp", "created"} {
			require.Contains(t, first, k)
		}

		names := func(query string) []string {
			t.Helper()
			r := e.AsAdmin(http.MethodGet, "/api/alerts/?"+query, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r.Body)
			var out []string
			for _, a := range r.JSON().([]any) {
				out = append(out, a.(map[string]any)["name"].(string))
			}
			return out
		}
		require.Equal(t, []string{"disk_full"}, names("name=disk_full"))
		require.Equal(t, []string{"disk_full", "node_offline"}, names("node=n1"))
		require.Equal(t, []string{"job_failed"}, names("site=site2"))
		require.Equal(t, []string{"node_offline"}, names("severity=warning"))
		require.Equal(t, []string{"disk_full"}, names("summary=tank"))
		require.Equal(t, []string{"disk_full", "node_offline"}, names("timestamp=2026-03-14"))
		require.Equal(t, []string{"disk_full"}, names("timestamp="+url.QueryEscape(day.Format(time.RFC3339Nano))))
		require.Equal(t, []string{"node_offline"}, names("suppressed=true"))
		require.Equal(t, []string{"job_failed", "disk_full"}, names("suppressed=false"))
		require.Equal(t, []string{"disk_full"}, names("site=site1&suppressed=false"))
		require.Empty(t, names("name=nothing"))
		for _, q := range []string{"suppressed=perhaps", "timestamp=yesterday"} {
			require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/alerts/?"+q, nil).Status, q)
		}

		path := "/api/alerts/" + catID(float64(disk)) + "/"
		r = e.AsAdmin(http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "Pool TANK is 99% full", r.Map()["summary"])

		// PATCH changes suppressed only.
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"suppressed": true, "name": "renamed", "severity": "info"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, true, r.Map()["suppressed"])
		require.Equal(t, "disk_full", r.Map()["name"])
		require.Equal(t, "critical", r.Map()["severity"])
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodPatch, path, map[string]any{"suppressed": "y"}).Status)

		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/alerts/999/", nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, "/api/alerts/999/", map[string]any{"suppressed": true}).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/alerts/abc/", nil).Status)

		user := apitest.Bearer(e.CreateUser("alma"))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/alerts/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, path, user, map[string]any{"suppressed": false}).Status)
	})
}

// TestActions: an action is recorded for its caller and run by an
// ActionWorkflow (PENDING → STARTED → SUCCESS or FAILURE with results);
// only the known actions are accepted.
func TestActions(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		root := t.TempDir()
		e.StartSiteWorker(worker.SiteConfig{Site: "a1", Queue: "default", Node: "n1", Root: root, HeartbeatInterval: time.Second})
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "a1"}))
		finished := func(path string) map[string]any {
			t.Helper()
			var a map[string]any
			require.Eventually(t, func() bool {
				a = e.AsAdmin(http.MethodGet, path, nil).Map()
				return a["state"] == "SUCCESS" || a["state"] == "FAILURE"
			}, time.Minute, 50*time.Millisecond)
			return a
		}

		r := e.AsAdmin(http.MethodPost, "/api/actions/", map[string]any{"action": "refresh_sites", "state": "SUCCESS", "results": "forged", "user": 42})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		a := r.Map()
		require.Equal(t, "refresh_sites", a["action"])
		require.NotEqual(t, "forged", a["results"], "state and results are set by the hub")
		admin, err := models.GetUser(t.Context(), e.DB, "admin")
		require.NoError(t, err)
		require.Equal(t, float64(admin.ID), a["user"])
		path := "/api/actions/" + catID(a["id"]) + "/"
		a = finished(path)
		require.Equal(t, "SUCCESS", a["state"], a)
		require.Equal(t, "site a1: refreshed", a["results"])
		pools := e.AsAdmin(http.MethodGet, "/api/storagepools/?site=1", nil).Map()
		require.Positive(t, pools["count"], "the site really was refreshed: its pools are known")

		r = e.AsAdmin(http.MethodPost, "/api/actions/", map[string]any{"action": "maintenance"})
		require.Equal(t, http.StatusCreated, r.Status)
		a = finished("/api/actions/" + catID(r.Map()["id"]) + "/")
		require.Equal(t, "SUCCESS", a["state"], a)
		require.Contains(t, a["results"], "purged 0 jobs")

		r = e.AsAdmin(http.MethodPost, "/api/actions/", map[string]any{"action": "sync_nas_users"})
		require.Equal(t, http.StatusCreated, r.Status)
		a = finished("/api/actions/" + catID(r.Map()["id"]) + "/")
		require.Equal(t, "SUCCESS", a["state"], a)
		require.Equal(t, "site a1: 0 NAS users applied", a["results"])
		require.FileExists(t, filepath.Join(root, ".hub", "config", "nas_users.json"))

		r = e.AsAdmin(http.MethodGet, "/api/actions/", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, float64(3), r.Map()["count"], "paginated")
		item := r.Map()["results"].([]any)[2].(map[string]any)
		require.Equal(t, "refresh_sites", item["action"], "newest first")
		require.NotContains(t, item, "results", "detail only")
		require.NotContains(t, item, "user", "detail only")

		for _, body := range []any{map[string]any{}, map[string]any{"action": ""}, map[string]any{"action": "  "},
			map[string]any{"action": 5}, map[string]any{"action": "rescan site1"}} {
			r = e.AsAdmin(http.MethodPost, "/api/actions/", body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v", body)
			require.Contains(t, r.Map(), "action")
		}
		require.Contains(t, r.Map()["action"].([]any)[0], "maintenance, refresh_sites, sync_nas_users")
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/actions/999/", nil).Status)
		require.Equal(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodPatch, path, map[string]any{}).Status)

		user := apitest.Bearer(e.CreateUser("amos"))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/actions/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/actions/", user, map[string]any{"action": "maintenance"}).Status)
		apitest.RecordHistories(t, e.Temporal)
	})
}
