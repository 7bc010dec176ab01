package hub_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

// settingsSite is a site with a live worker whose settings file the test reads.
type settingsSite struct {
	name, configDir string
	id              int64
}

func newSettingsSite(t *testing.T, e *apitest.Env, name string) settingsSite {
	s, err := models.EnsureSite(t.Context(), e.DB, name)
	require.NoError(t, err)
	ss := settingsSite{name: name, configDir: t.TempDir(), id: s.ID}
	e.StartSiteWorker(worker.SiteConfig{Site: name, Queue: vocab.DefaultQueue, Node: name + "-n1",
		Root: t.TempDir(), ConfigDir: ss.configDir, HeartbeatInterval: 10 * time.Second})
	return ss
}

// applied reads the site's settings file.
func (s settingsSite) applied(t *testing.T) map[string]any {
	data, err := os.ReadFile(filepath.Join(s.configDir, "settings.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

func (s settingsSite) path() string { return "/api/sites/" + catID(float64(s.id)) + "/settings/" }

// waitSettingsTasks polls each settings task until it is final and
// returns the final records.
func waitSettingsTasks(t *testing.T, e *apitest.Env, ids ...float64) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		require.Eventually(t, func() bool {
			r := e.AsAdmin(http.MethodGet, "/api/settingstasks/"+catID(id)+"/", nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			out[i] = r.Map()
			return out[i]["state"] == "SUCCESS" || out[i]["state"] == "FAILURE"
		}, 60*time.Second, 100*time.Millisecond)
		require.Equal(t, "SUCCESS", out[i]["state"], "%v", out[i]["results"])
	}
	return out
}

// taskIDs returns the task ids of a 202 answer, by site.
func taskIDs(t *testing.T, r apitest.Response) map[string]float64 {
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	ids := map[string]float64{}
	for _, x := range r.Map()["tasks"].([]any) {
		ids[x.(map[string]any)["site"].(string)] = x.(map[string]any)["task_id"].(float64)
	}
	return ids
}

func TestSettingsPropagation(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s1, s2 := newSettingsSite(t, e, "site1"), newSettingsSite(t, e, "site2")

		// A global PATCH stores the values and sends them to every site.
		r := e.AsAdmin(http.MethodPatch, "/api/settings/", map[string]any{"values": []any{
			map[string]any{"key": "walk:workers", "value": 8},
			map[string]any{"key": "log:level", "value": "debug"},
			map[string]any{"key": "smb:options", "value": map[string]any{"signing": true}},
		}})
		ids := taskIDs(t, r)
		require.Len(t, ids, 2)
		tasks := waitSettingsTasks(t, e, ids["site1"], ids["site2"])
		require.Equal(t, "apply_settings", tasks[0]["tasktype"])
		require.Contains(t, tasks[0]["task_id"], "settings-")
		require.Equal(t, tasks[0]["task_id"], tasks[1]["task_id"], "one workflow serves both")
		require.NotNil(t, tasks[0]["completed"])
		require.NotNil(t, tasks[0]["runtime"])
		require.Len(t, tasks[0]["request"].(map[string]any)["values"], 3)
		want := map[string]any{"walk:workers": float64(8), "log:level": "debug", "smb:options": map[string]any{"signing": true}}
		require.Equal(t, want, s1.applied(t))
		require.Equal(t, want, s2.applied(t))

		r = e.AsAdmin(http.MethodGet, "/api/settings/", nil)
		require.Equal(t, http.StatusOK, r.Status)
		list := r.JSON().([]any)
		require.Len(t, list, 3)
		require.Equal(t, "log:level", list[0].(map[string]any)["key"], "ordered by key")
		for _, k := range []string{"id", "key", "value", "desc"} {
			require.Contains(t, list[0], k)
		}

		// A site's own value overrides the global one, and a later global
		// change of that key does not clobber it at the site.
		r = e.AsAdmin(http.MethodPatch, s1.path(), map[string]any{"values": []any{
			map[string]any{"key": "log:level", "value": "warn"},
			map[string]any{"key": "target:bucket:tank", "value": "cold"},
		}})
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, "site1", r.Map()["site"])
		waitSettingsTasks(t, e, r.Map()["task_id"].(float64))
		require.Equal(t, "warn", s1.applied(t)["log:level"])
		require.Equal(t, "cold", s1.applied(t)["target:bucket:tank"])

		r = e.AsAdmin(http.MethodPatch, "/api/settings/", map[string]any{"values": []any{
			map[string]any{"key": "log:level", "value": "error"},
			map[string]any{"key": "walk:workers", "value": nil},
		}})
		ids = taskIDs(t, r)
		waitSettingsTasks(t, e, ids["site1"], ids["site2"])
		a1, a2 := s1.applied(t), s2.applied(t)
		require.Equal(t, "warn", a1["log:level"], "the site's own value wins")
		require.Equal(t, "error", a2["log:level"])
		require.NotContains(t, a1, "walk:workers", "null deletes at every site")
		require.NotContains(t, a2, "walk:workers")
		r = e.AsAdmin(http.MethodGet, "/api/settings/", nil)
		require.Len(t, r.JSON(), 2, "null deleted the key in the hub")

		// Site settings: the effective view, as a list or flat.
		r = e.AsAdmin(http.MethodGet, s1.path(), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		scopes := map[string]string{}
		for _, x := range r.JSON().([]any) {
			scopes[x.(map[string]any)["key"].(string)] = x.(map[string]any)["scope"].(string)
		}
		require.Equal(t, map[string]string{"log:level": "site", "smb:options": "global", "target:bucket:tank": "site"}, scopes)
		r = e.AsAdmin(http.MethodGet, s1.path()+"?flat=true", nil)
		require.Equal(t, map[string]any{"log:level": "warn", "smb:options": map[string]any{"signing": true}, "target:bucket:tank": "cold"}, r.Map())

		// Deleting the site's own value falls back to the global one.
		r = e.AsAdmin(http.MethodPatch, s1.path(), map[string]any{"values": []any{map[string]any{"key": "log:level", "value": nil}}})
		waitSettingsTasks(t, e, r.Map()["task_id"].(float64))
		require.Equal(t, "error", s1.applied(t)["log:level"])

		// Refresh imports what the site applies and the hub lacks.
		local := s2.applied(t)
		local["nfs:threads"] = 16
		local["bad key"] = 1
		data, err := json.Marshal(local)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(s2.configDir, "settings.json"), data, 0o600))
		r = e.AsAdmin(http.MethodPost, s2.path()+"refresh/", nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		task := waitSettingsTasks(t, e, r.Map()["task_id"].(float64))[0]
		require.Equal(t, "refresh_settings", task["tasktype"])
		require.Equal(t, []any{"nfs:threads"}, task["results"].(map[string]any)["created"])
		require.Equal(t, []any{"bad key"}, task["results"].(map[string]any)["skipped"])
		r = e.AsAdmin(http.MethodGet, s2.path()+"?flat=true", nil)
		require.Equal(t, float64(16), r.Map()["nfs:threads"])
		r = e.AsAdmin(http.MethodGet, s1.path()+"?flat=true", nil)
		require.NotContains(t, r.Map(), "nfs:threads", "imported for site2 only")

		// Sync sends every effective setting again, to one site or all.
		require.NoError(t, os.Remove(filepath.Join(s1.configDir, "settings.json")))
		ids = taskIDs(t, e.AsAdmin(http.MethodPost, "/api/settings/sync/?site=site1", nil))
		require.Len(t, ids, 1)
		waitSettingsTasks(t, e, ids["site1"])
		require.Equal(t, map[string]any{"log:level": "error", "smb:options": map[string]any{"signing": true}, "target:bucket:tank": "cold"}, s1.applied(t))
		ids = taskIDs(t, e.AsAdmin(http.MethodPost, "/api/settings/sync/", nil))
		require.Len(t, ids, 2)
		waitSettingsTasks(t, e, ids["site1"], ids["site2"])
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodPost, "/api/settings/sync/?site=nowhere", nil).Status)

		// Settings task listing and filters.
		r = e.AsAdmin(http.MethodGet, "/api/settingstasks/", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, float64(10), r.Map()["count"])
		item := r.Map()["results"].([]any)[0].(map[string]any)
		require.NotContains(t, item, "request", "detail only")
		for q, n := range map[string]float64{
			"tasktype=refresh_settings": 1, "tasktype=apply_settings": 9, "state=SUCCESS": 10,
			"state=FAILURE": 0, "state=FAILURE&state=SUCCESS": 10, "state=PENDING,STARTED": 0, "job_id=1": 0,
		} {
			r = e.AsAdmin(http.MethodGet, "/api/settingstasks/?"+q, nil)
			require.Equal(t, http.StatusOK, r.Status, q)
			require.Equal(t, n, r.Map()["count"], q)
		}
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/settingstasks/?job_id=x", nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/settingstasks/9999/", nil).Status)
	})
}

func TestSettingsValidation(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		site, err := models.EnsureSite(t.Context(), e.DB, "site1")
		require.NoError(t, err)
		sitePath := "/api/sites/" + catID(float64(site.ID)) + "/settings/"
		v := func(key string, value any) map[string]any { return map[string]any{"key": key, "value": value} }
		bad := []struct {
			path  string
			body  any
			field string
		}{
			{"/api/settings/", map[string]any{}, "values"},
			{"/api/settings/", map[string]any{"values": []any{}}, "values"},
			{"/api/settings/", map[string]any{"values": "x"}, "values"},
			// A target-specific key refuses the whole global request.
			{"/api/settings/", map[string]any{"values": []any{v("log:level", "info"), v("target:bucket:tank", "x")}}, "values[1].key"},
			{"/api/settings/", map[string]any{"values": []any{v("nocolon", 1)}}, "values[0].key"},
			{"/api/settings/", map[string]any{"values": []any{v("a:b c", 1)}}, "values[0].key"},
			{"/api/settings/", map[string]any{"values": []any{v("a:b", 1), v("a:b", 2)}}, "values[1].key"},
			{"/api/settings/", map[string]any{"values": []any{map[string]any{"key": "a:b"}}}, "values[0].value"},
			{sitePath, map[string]any{"values": []any{v("a:b:c:d", 1)}}, "values[0].key"},
			{sitePath, map[string]any{}, "values"},
		}
		for _, b := range bad {
			r := e.AsAdmin(http.MethodPatch, b.path, b.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", b.body, r.Body)
			require.Contains(t, r.Map(), b.field, "%v: %s", b.body, r.Body)
		}
		r := e.AsAdmin(http.MethodGet, "/api/settings/", nil)
		require.Equal(t, []any{}, r.JSON(), "a refused request stores nothing")
		r = e.AsAdmin(http.MethodGet, "/api/settingstasks/", nil)
		require.Equal(t, float64(0), r.Map()["count"], "and starts nothing")

		// Unknown sites are 404.
		for _, m := range []string{http.MethodGet, http.MethodPatch} {
			require.Equal(t, http.StatusNotFound, e.AsAdmin(m, "/api/sites/999/settings/", map[string]any{"values": []any{v("a:b", 1)}}).Status, m)
		}
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodPost, "/api/sites/999/settings/refresh/", nil).Status)
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, sitePath+"?flat=maybe", nil).Status)

		// Settings are for administrators: plain users may not read or write.
		user := apitest.Bearer(e.CreateUser("sam"))
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/settings/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, "/api/settings/", user, map[string]any{"values": []any{v("a:b", 1)}}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/settings/sync/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, sitePath, user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, sitePath, user, map[string]any{"values": []any{v("a:b", 1)}}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, sitePath+"refresh/", user, nil).Status)
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/settingstasks/", user, nil).Status)

		// With no site worker a global PATCH still answers 202 at once;
		// the task waits for the site.
		r = e.AsAdmin(http.MethodPatch, "/api/settings/", map[string]any{"values": []any{v("log:level", "info")}})
		ids := taskIDs(t, r)
		require.Len(t, ids, 1)
		r = e.AsAdmin(http.MethodGet, "/api/settingstasks/"+catID(ids["site1"])+"/", nil)
		require.Contains(t, []any{"PENDING", "STARTED"}, r.Map()["state"])
		require.Equal(t, "site1", r.Map()["site"])
	})
}
