package hub_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func TestNodesAndQueues(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		for _, s := range []string{"site1", "site2"} {
			_, err := models.EnsureSite(ctx, e.DB, s)
			require.NoError(t, err)
		}
		now := time.Now().UTC()
		beat := func(site, node, queue string, at time.Time) {
			require.NoError(t, models.RecordHeartbeat(ctx, e.DB, models.Heartbeat{Site: site, Node: node, Queue: queue, At: at}))
		}
		beat("site1", "alpha", "default", now)
		beat("site1", "alpha", "fast", now)
		beat("site1", "beta", "fast", now.Add(-time.Hour)) // stale: offline
		beat("site2", "gamma", "default", now)

		r := e.AsAdmin(http.MethodGet, "/api/nodes/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(3), r.Map()["count"])
		nodes := map[string]map[string]any{}
		for _, n := range r.Map()["results"].([]any) {
			nodes[n.(map[string]any)["name"].(string)] = n.(map[string]any)
		}
		require.Equal(t, "site1", nodes["alpha"]["site"])
		require.Equal(t, true, nodes["alpha"]["online"])
		require.Equal(t, true, nodes["alpha"]["has_default_queue"])
		require.Equal(t, false, nodes["beta"]["online"])
		require.Equal(t, false, nodes["beta"]["has_default_queue"])
		for _, k := range []string{"id", "url", "name", "site", "last_heartbeat", "online", "has_default_queue"} {
			require.Contains(t, nodes["alpha"], k)
		}
		r = e.AsAdmin(http.MethodGet, "/api/nodes/?site=site2", nil)
		require.Equal(t, float64(1), r.Map()["count"])
		require.Equal(t, "gamma", r.Map()["results"].([]any)[0].(map[string]any)["name"])

		beta := "/api/nodes/" + catID(nodes["beta"]["id"]) + "/"
		r = e.AsAdmin(http.MethodGet, beta, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "beta", r.Map()["name"])

		// PATCH name, site and last_heartbeat; online is read only.
		r = e.AsAdmin(http.MethodPatch, beta, map[string]any{"name": "beta.example.org", "site": "site2",
			"last_heartbeat": now.Format(time.RFC3339Nano), "online": false, "has_default_queue": true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "beta.example.org", r.Map()["name"])
		require.Equal(t, "site2", r.Map()["site"])
		require.Equal(t, true, r.Map()["online"])
		require.Equal(t, false, r.Map()["has_default_queue"])
		r = e.AsAdmin(http.MethodPatch, beta, map[string]any{"last_heartbeat": nil})
		require.Equal(t, http.StatusOK, r.Status)
		require.Nil(t, r.Map()["last_heartbeat"])
		require.Equal(t, false, r.Map()["online"])
		for body, field := range map[string]string{
			`{"name": "bad name!"}`:      "name",
			`{"site": "nowhere"}`:        "site",
			`{"last_heartbeat": "noon"}`: "last_heartbeat",
			`{"last_heartbeat": 5}`:      "last_heartbeat",
			`{"name": 5}`:                "name",
		} {
			r = e.AsAdmin(http.MethodPatch, beta, body)
			require.Equal(t, http.StatusBadRequest, r.Status, body)
			require.Contains(t, r.Map(), field, body)
		}

		// Queues.
		r = e.AsAdmin(http.MethodGet, "/api/queues/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(3), r.Map()["count"])
		r = e.AsAdmin(http.MethodGet, "/api/queues/?site=site1", nil)
		require.Equal(t, float64(2), r.Map()["count"])
		var fast map[string]any
		for _, q := range r.Map()["results"].([]any) {
			if q.(map[string]any)["name"] == "fast" {
				fast = q.(map[string]any)
			}
		}
		require.NotNil(t, fast)
		require.ElementsMatch(t, []any{"alpha", "beta.example.org"}, fast["nodes"])
		require.Equal(t, "site1", fast["site"])
		for _, k := range []string{"id", "name", "label", "last_heartbeat", "nodes", "site"} {
			require.Contains(t, fast, k)
		}
		qpath := "/api/queues/" + catID(fast["id"]) + "/"
		r = e.AsAdmin(http.MethodGet, qpath, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "fast", r.Map()["name"])
		require.Equal(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodPatch, qpath, map[string]any{}).Status)

		// Permissions: plain users read; writes need change/delete_node.
		user := apitest.Bearer(e.CreateUser("nell"))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/nodes/", user, nil).Status)
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/queues/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, beta, user, map[string]any{"name": "x"}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodDelete, beta, user, nil).Status)

		// DELETE forgets the node and its queue links.
		require.Equal(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, beta, nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, beta, nil).Status)
		require.Equal(t, []any{"alpha"}, e.AsAdmin(http.MethodGet, qpath, nil).Map()["nodes"])
		for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
			require.Equal(t, http.StatusNotFound, e.AsAdmin(m, beta, map[string]any{}).Status, m)
		}
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/queues/999/", nil).Status)
	})
}
