package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// TestStoragePoolsAndServers: read-only resources filled from site reports.
func TestStoragePoolsAndServers(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		east, err := models.EnsureSite(ctx, e.DB, "east")
		require.NoError(t, err)
		west, err := models.EnsureSite(ctx, e.DB, "west")
		require.NoError(t, err)
		report := func(site *models.Site, pools ...string) {
			inv := models.SiteInventory{At: time.Now().UTC(), Server: &models.Server{Name: site.Name + "-host",
				ListOfInterfaces: map[string]any{"eth0": map[string]any{"addresses": []string{"10.0.0.1/24"}}}}}
			for i, p := range pools {
				inv.Pools = append(inv.Pools, models.StoragePool{Name: p, Filesystem: "xfs", Capacity: 100, FreeSpace: 60,
					UsedSpace: 40, IsDefault: i == 0})
			}
			require.NoError(t, models.StoreSiteInventory(ctx, e.DB, site.ID, inv))
		}
		report(east, "system", "fast")
		report(west, "system")

		r := e.AsAdmin(http.MethodGet, "/api/storagepools/", nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(3), r.Map()["count"])
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/storagepools/?site=%d", east.ID), nil)
		require.Equal(t, float64(2), r.Map()["count"])
		pool := r.Map()["results"].([]any)[1].(map[string]any)
		require.Equal(t, "system", pool["name"])
		require.Equal(t, true, pool["is_default"])
		require.Equal(t, "xfs", pool["filesystem"])
		require.Equal(t, float64(100), pool["capacity"])
		require.Equal(t, float64(60), pool["free_space"])
		require.Equal(t, float64(40), pool["used_space"])
		require.Equal(t, float64(east.ID), pool["site"])
		poolID := int64(pool["id"].(float64))
		requireFieldError(t, e.AsAdmin(http.MethodGet, "/api/storagepools/?site=x", nil), "site")

		// A new report replaces the site's pools, keeping the ids of those
		// still there.
		report(east, "system")
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/storagepools/?site=%d", east.ID), nil)
		require.Equal(t, float64(1), r.Map()["count"])
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("storagepools", poolID), nil))

		r = e.AsAdmin(http.MethodGet, "/api/servers/", nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(2), r.Map()["count"])
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/servers/?site=%d", west.ID), nil)
		require.Equal(t, float64(1), r.Map()["count"])
		srv := r.Map()["results"].([]any)[0].(map[string]any)
		require.Equal(t, "west-host", srv["name"])
		require.Equal(t, float64(west.ID), srv["site"])
		require.Contains(t, srv["list_of_interfaces"], "eth0")
		srvID := int64(srv["id"].(float64))
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("servers", srvID), nil))

		for _, coll := range []string{"storagepools", "servers"} {
			id := poolID
			if coll == "servers" {
				id = srvID
			}
			requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf(coll, 9999), nil))
			requireStatus(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodPost, "/api/"+coll+"/", map[string]any{"name": "x"}))
			requireStatus(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodPatch, pathOf(coll, id), map[string]any{"name": "x"}))
			requireStatus(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodDelete, pathOf(coll, id), nil))
			requireStatus(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/"+coll+"/", "", nil))
		}
		plain := apitest.Bearer(e.CreateUser("plain"))
		requireStatus(t, http.StatusOK, e.Do(http.MethodGet, "/api/storagepools/", plain, nil))
		requireStatus(t, http.StatusOK, e.Do(http.MethodGet, pathOf("servers", srvID), plain, nil))
		// A user in no group holds no view_ permission.
		r = e.AsAdmin(http.MethodPost, "/api/users/", map[string]any{"username": "loner", "password": "password-loner", "groups": []string{}})
		requireStatus(t, http.StatusCreated, r)
		loner := apitest.Bearer(e.Login("loner", "password-loner"))
		requireStatus(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/storagepools/", loner, nil))
		requireStatus(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/servers/", loner, nil))

		// Deleting a site drops its pools and servers.
		require.NoError(t, models.DeleteSite(ctx, e.DB, west.ID))
		require.Equal(t, float64(1), e.AsAdmin(http.MethodGet, "/api/servers/", nil).Map()["count"])
	})
}
