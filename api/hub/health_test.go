package hub_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

// TestHealthFromLiveWorkers: site status comes from real site workers'
// heartbeats, and a stopped worker shows offline once
// node_health_last_heartbeat_interval has passed.
func TestHealthFromLiveWorkers(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		for _, s := range []string{"east", "west"} {
			_, err := models.EnsureSite(ctx, e.DB, s)
			require.NoError(t, err)
		}
		conf := models.DefaultConfiguration()
		conf.NodeHealthLastHeartbeatInterval = 2
		require.NoError(t, models.SaveConfiguration(ctx, e.DB, conf))

		// Before any worker reports, both sites are critical.
		r := e.AsAdmin(http.MethodGet, "/api/health/", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "critical", r.Map()["overall_health"])

		e.StartHubWorker()
		stopEast := e.StartSiteWorker(worker.SiteConfig{Site: "east", Queue: "default", Node: "east-node", Root: t.TempDir(), HeartbeatInterval: 200 * time.Millisecond})
		e.StartSiteWorker(worker.SiteConfig{Site: "west", Queue: "default", Node: "west-node", Root: t.TempDir(), HeartbeatInterval: 200 * time.Millisecond})

		siteHealth := func() (overall string, sites map[string]map[string]any) {
			m := e.AsAdmin(http.MethodGet, "/api/health/", nil).Map()
			sites = map[string]map[string]any{}
			for _, s := range m["site_status"].([]any) {
				sm := s.(map[string]any)
				sites[sm["site"].(string)] = sm
			}
			return m["overall_health"].(string), sites
		}
		require.Eventually(t, func() bool { o, _ := siteHealth(); return o == "ok" }, 30*time.Second, 100*time.Millisecond)
		m := e.AsAdmin(http.MethodGet, "/api/health/", nil).Map()
		require.Equal(t, "ok", m["hub_status"].(map[string]any)["health"])
		_, sites := siteHealth()
		node := sites["east"]["nodes"].([]any)[0].(map[string]any)
		require.Equal(t, "east-node", node["name"])
		require.Equal(t, true, node["online"])
		require.Equal(t, true, node["has_default_queue"])
		require.NotEmpty(t, node["last_heartbeat"])
		require.NotEmpty(t, node["worker_version"])
		require.NotEmpty(t, node["engine_version"])
		queue := sites["east"]["queues"].([]any)[0].(map[string]any)
		require.Equal(t, "default", queue["name"])
		require.Equal(t, true, queue["online"])

		stopEast()
		require.Eventually(t, func() bool {
			o, s := siteHealth()
			return o == "warning" && s["east"]["health"] == "critical" && s["west"]["health"] == "ok"
		}, 30*time.Second, 200*time.Millisecond)
		_, sites = siteHealth()
		require.Equal(t, false, sites["east"]["nodes"].([]any)[0].(map[string]any)["online"])
		require.Equal(t, false, sites["east"]["queues"].([]any)[0].(map[string]any)["online"])
	})
}
