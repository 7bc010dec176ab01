package hub_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
)

func TestConfiguration(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodGet, "/api/configurations/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		conf := r.Map()
		require.Equal(t, float64(120), conf["node_health_last_heartbeat_interval"])
		require.Equal(t, "database", conf["search_backend"])
		require.Equal(t, []any{}, conf["alert_email_address"])
		require.Len(t, conf, 41, "every field of the configuration: the spec's 40 and file_index_scan_schedule")

		// PATCH changes only what is sent and returns the whole object.
		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{
			"jobs_ttl": 30, "alert_email_address": []string{"ops@example.com", "oncall@example.org"},
			"db_backup_schedule": "30 3 * * 1-5", "db_backup_enabled": true, "db_backup_dir": "/var/backups/hub",
			"orchestrator_task_timeout": 12.5, "custom_statistics_tasks": map[string]any{"scan": true},
			"search_backend": "searchengine", "unknown_field": 1,
		})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		conf = r.Map()
		require.Equal(t, float64(30), conf["jobs_ttl"])
		require.Equal(t, 12.5, conf["orchestrator_task_timeout"])
		require.Equal(t, float64(120), conf["node_health_last_heartbeat_interval"], "unchanged")
		require.NotContains(t, conf, "unknown_field")
		r = e.AsAdmin(http.MethodGet, "/api/configurations/", nil)
		require.Equal(t, []any{"ops@example.com", "oncall@example.org"}, r.Map()["alert_email_address"])
		require.Equal(t, "30 3 * * 1-5", r.Map()["db_backup_schedule"])
		require.Equal(t, map[string]any{"scan": true}, r.Map()["custom_statistics_tasks"])
		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"custom_statistics_tasks": map[string]any{"index": 2}})
		require.Equal(t, map[string]any{"index": float64(2)}, r.Map()["custom_statistics_tasks"], "an object replaces, never merges")
		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"jobs_ttl": nil, "custom_statistics_tasks": nil})
		require.Equal(t, float64(30), r.Map()["jobs_ttl"], "null leaves a value unchanged")
		require.Equal(t, map[string]any{"index": float64(2)}, r.Map()["custom_statistics_tasks"])

		bad := []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"jobs_ttl": -1}, "jobs_ttl"},
			{map[string]any{"initial_uid": -5}, "initial_uid"},
			{map[string]any{"health_timeout": 0}, "health_timeout"},
			{map[string]any{"stat_timeout": -3}, "stat_timeout"},
			{map[string]any{"node_health_last_heartbeat_interval": 0}, "node_health_last_heartbeat_interval"},
			{map[string]any{"orchestrator_task_timeout": 0}, "orchestrator_task_timeout"},
			{map[string]any{"task_invalidation_timeout": 1.5}, "task_invalidation_timeout"},
			{map[string]any{"schedules_enabled": "yes"}, "schedules_enabled"},
			{map[string]any{"search_backend": "grep"}, "search_backend"},
			{map[string]any{"db_backup_type": "partial"}, "db_backup_type"},
			{map[string]any{"filebrowser_proxies_backend": "cdn"}, "filebrowser_proxies_backend"},
			{map[string]any{"db_backup_schedule": "every day"}, "db_backup_schedule"},
			{map[string]any{"db_backup_schedule": "61 * * * *"}, "db_backup_schedule"},
			{map[string]any{"alert_email_address": []string{"ok@example.com", "not-an-address"}}, "alert_email_address[1]"},
			{map[string]any{"alert_email_address": "ops@example.com"}, "alert_email_address"},
			{map[string]any{"db_backup_report_to": "Ops <ops@example.com>"}, "db_backup_report_to"},
			{map[string]any{"default_space_location": "relative/dir"}, "default_space_location"},
			{map[string]any{"db_backup_dir": ""}, "db_backup_dir"},
			{map[string]any{"custom_statistics_tasks": []string{"x"}}, "custom_statistics_tasks"},
		}
		for _, b := range bad {
			r = e.AsAdmin(http.MethodPatch, "/api/configurations/", b.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", b.body, r.Body)
			require.Contains(t, r.Map(), b.field, "%v: %s", b.body, r.Body)
		}
		r = e.AsAdmin(http.MethodGet, "/api/configurations/", nil)
		require.Equal(t, float64(30), r.Map()["jobs_ttl"], "a refused PATCH changes nothing")

		// view_configuration is not granted to plain users.
		user := apitest.Bearer(e.CreateUser("cora"))
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/configurations/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, "/api/configurations/", user, map[string]any{"jobs_ttl": 1}).Status)
		require.Equal(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodPost, "/api/configurations/", map[string]any{}).Status)
	})
}
