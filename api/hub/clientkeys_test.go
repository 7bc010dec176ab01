package hub_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
)

func TestClientKeys(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		user := apitest.Bearer(e.CreateUser("frank"))
		r := e.Do(http.MethodPost, "/api/auth/clientkeys/", user, map[string]string{"name": "ci"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		created := r.Map()
		key := created["api_key"].(string)
		for _, k := range []string{"id", "url", "name", "api_key", "user"} {
			require.Contains(t, created, k)
		}
		require.Equal(t, "frank", created["user"])
		path := fmt.Sprintf("/api/auth/clientkeys/%d/", int(created["id"].(float64)))

		// The key authenticates as its user; it is never shown again.
		apiKey := "Api-Key " + key
		r = e.Do(http.MethodGet, "/api/my-permissions/", apiKey, nil)
		require.Equal(t, http.StatusOK, r.Status)
		r = e.Do(http.MethodGet, path, user, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.NotContains(t, r.Map(), "api_key")
		r = e.Do(http.MethodGet, "/api/auth/clientkeys/", apiKey, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, float64(1), r.Map()["count"])
		require.NotContains(t, r.Map()["results"].([]any)[0], "api_key")

		// Key permissions are the user's: no admin rights.
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/users/", apiKey, nil).Status)
		// Stored only as a hash: the secret part is nowhere in the row.
		var row struct {
			Prefix  string `bun:"prefix"`
			KeyHash string `bun:"key_hash"`
		}
		require.NoError(t, e.DB.NewSelect().Table("client_keys").Column("prefix", "key_hash").Scan(t.Context(), &row))
		secret := strings.SplitN(key, ".", 2)[1]
		require.NotContains(t, row.KeyHash, secret)
		require.NotContains(t, row.Prefix, secret)
		require.Len(t, row.KeyHash, 64, "sha-256 hex")

		// Wrong or malformed keys are 401.
		for _, bad := range []string{"Api-Key " + key + "x", "Api-Key nodot", "Api-Key ", "Api-Key a.b"} {
			require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/my-permissions/", bad, nil).Status, bad)
		}

		// Rename; another user cannot see or touch the key; admin can.
		r = e.Do(http.MethodPatch, path, user, map[string]string{"name": "ci-2"})
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "ci-2", r.Map()["name"])
		require.Equal(t, http.StatusBadRequest, e.Do(http.MethodPatch, path, user, map[string]string{"name": ""}).Status)
		other := apitest.Bearer(e.CreateUser("grace"))
		require.Equal(t, http.StatusNotFound, e.Do(http.MethodGet, path, other, nil).Status)
		require.Equal(t, http.StatusNotFound, e.Do(http.MethodDelete, path, other, nil).Status)
		require.Equal(t, http.StatusOK, e.AsAdmin(http.MethodGet, path, nil).Status)

		require.Equal(t, http.StatusBadRequest, e.Do(http.MethodPost, "/api/auth/clientkeys/", user, map[string]string{}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/auth/clientkeys/", apiKey, map[string]string{"name": "k2"}).Status)
		// Nor renamed or revoked with one: a leaked key cannot revoke its
		// owner's keys.
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, path, apiKey, map[string]string{"name": "leaked"}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodDelete, path, apiKey, nil).Status)

		// A deleted key stops working at once.
		require.Equal(t, http.StatusNoContent, e.Do(http.MethodDelete, path, user, nil).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/my-permissions/", apiKey, nil).Status)
		require.Equal(t, http.StatusNotFound, e.Do(http.MethodGet, path, user, nil).Status)

		// A deactivated user's keys stop working too.
		r = e.Do(http.MethodPost, "/api/auth/clientkeys/", other, map[string]string{"name": "g"})
		require.Equal(t, http.StatusCreated, r.Status)
		gkey := "Api-Key " + r.Map()["api_key"].(string)
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/my-permissions/", gkey, nil).Status)
		require.Equal(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/users/grace/deactivate/", nil).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/my-permissions/", gkey, nil).Status)
	})
}
