package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func TestDatastores(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		const access, secret = "AKIA-DATASTORE-ACCESS", "very-secret-datastore-key"
		r := e.AsAdmin(http.MethodPost, "/api/datastores/", map[string]any{
			"name": "s3-main", "type": "s3", "accesskey": access, "accesskeyid": "AKID", "secretaccesskey": secret,
			"bucket": "b1", "container": "c1", "credentialsfile": "/etc/creds", "endpoint": "https://s3.example.com",
			"region": "eu-west-1", "storageaccount": "acct", "id": 77, "url": "x",
		})
		requireStatus(t, http.StatusCreated, r)
		id := recordID(t, r)
		require.NotEqual(t, int64(77), id)
		d := r.Map()
		require.Equal(t, "s3-main", d["name"])
		require.Equal(t, "AKID", d["accesskeyid"])
		require.Equal(t, "eu-west-1", d["region"])
		for _, f := range []string{"bucket", "container", "credentialsfile", "endpoint", "storageaccount", "url"} {
			require.Contains(t, d, f)
		}
		require.NotContains(t, d, "accesskey")
		require.NotContains(t, d, "secretaccesskey")
		requireNoSecret(t, r, access, secret)

		// Sealed at rest, and openable with the hub's key.
		var row struct {
			AccessKey string `bun:"accesskey_enc"`
			Secret    string `bun:"secretaccesskey_enc"`
		}
		require.NoError(t, e.DB.NewSelect().Table("datastores").Column("accesskey_enc", "secretaccesskey_enc").
			Where("id = ?", id).Scan(context.Background(), &row.AccessKey, &row.Secret))
		require.NotContains(t, row.AccessKey, access)
		require.NotContains(t, row.Secret, secret)
		plain, err := e.Secrets.Open(models.ColDatastoreSecretAccessKey, row.Secret)
		require.NoError(t, err)
		require.Equal(t, secret, plain)

		r = e.AsAdmin(http.MethodGet, pathOf("datastores", id), nil)
		requireStatus(t, http.StatusOK, r)
		requireNoSecret(t, r, access, secret)
		r = e.AsAdmin(http.MethodGet, "/api/datastores/", nil)
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, float64(1), r.Map()["count"])
		requireNoSecret(t, r, access, secret)

		r = e.AsAdmin(http.MethodPatch, pathOf("datastores", id), map[string]any{"region": "us-east-1", "secretaccesskey": "rotated-secret-2"})
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, "us-east-1", r.Map()["region"])
		require.Equal(t, "s3", r.Map()["type"])
		requireNoSecret(t, r, "rotated-secret-2")

		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"name missing", map[string]any{"type": "s3"}, "name"},
			{"type missing", map[string]any{"name": "x"}, "type"},
			{"name taken", map[string]any{"name": "s3-main", "type": "s3"}, "name"},
			{"wrong type", map[string]any{"name": "x", "type": "s3", "region": 5}, "region"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/datastores/", tc.body), tc.field)
			})
		}
		requireFieldError(t, e.AsAdmin(http.MethodPatch, pathOf("datastores", id), map[string]any{"type": ""}), "type")

		checkPermissions(t, e, "plain", "datastores", id, map[string]any{"name": "p", "type": "s3"})

		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("datastores", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("datastores", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, pathOf("datastores", id), map[string]any{}))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("datastores", id), nil))
	})
}

// requireNoSecret checks that no secret appears anywhere in a raw body.
func requireNoSecret(t *testing.T, r apitest.Response, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.False(t, strings.Contains(string(r.Body), s), "secret %q leaked in %s", s, r.Body)
	}
}

func TestIPAddresses(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ds1 := recordID(t, e.AsAdmin(http.MethodPost, "/api/datastores/", map[string]any{"name": "one", "type": "nfs"}))
		ds2 := recordID(t, e.AsAdmin(http.MethodPost, "/api/datastores/", map[string]any{"name": "two", "type": "nfs"}))

		r := e.AsAdmin(http.MethodPost, "/api/ipaddresses/", map[string]any{"ipaddr": "10.1.2.3", "datastore": ds1, "id": 5})
		requireStatus(t, http.StatusCreated, r)
		id := recordID(t, r)
		a := r.Map()
		require.Equal(t, "10.1.2.3", a["ipaddr"])
		ds := a["datastore"].(map[string]any)
		require.Equal(t, float64(ds1), ds["id"])
		require.Equal(t, "one", ds["name"])
		require.True(t, strings.HasSuffix(ds["url"].(string), pathOf("datastores", ds1)))
		require.True(t, strings.HasSuffix(a["url"].(string), pathOf("ipaddresses", id)))

		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/ipaddresses/", map[string]any{"ipaddr": "10.1.2.4", "datastore": ds2}))
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/ipaddresses/", map[string]any{"ipaddr": "10.1.2.3", "datastore": ds2}))
		count := func(path string) float64 {
			r := e.AsAdmin(http.MethodGet, path, nil)
			requireStatus(t, http.StatusOK, r)
			return r.Map()["count"].(float64)
		}
		require.Equal(t, float64(3), count("/api/ipaddresses/"))
		require.Equal(t, float64(1), count(fmt.Sprintf("/api/ipaddresses/?datastore_id=%d", ds1)))
		require.Equal(t, float64(2), count(fmt.Sprintf("/api/ipaddresses/?datastore_id=%d", ds2)))
		requireFieldError(t, e.AsAdmin(http.MethodGet, "/api/ipaddresses/?datastore_id=one", nil), "datastore_id")

		r = e.AsAdmin(http.MethodPatch, pathOf("ipaddresses", id), map[string]any{"ipaddr": "192.168.0.1", "datastore": ds2})
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, "192.168.0.1", r.Map()["ipaddr"])
		require.Equal(t, "two", r.Map()["datastore"].(map[string]any)["name"])
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("ipaddresses", id), nil))

		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"ipaddr missing", map[string]any{"datastore": ds1}, "ipaddr"},
			{"ipv6", map[string]any{"ipaddr": "::1", "datastore": ds1}, "ipaddr"},
			{"mapped ipv6", map[string]any{"ipaddr": "::ffff:10.0.0.1", "datastore": ds1}, "ipaddr"},
			{"not an address", map[string]any{"ipaddr": "10.0.0.256", "datastore": ds1}, "ipaddr"},
			{"cidr", map[string]any{"ipaddr": "10.0.0.0/8", "datastore": ds1}, "ipaddr"},
			{"ipaddr wrong type", map[string]any{"ipaddr": 10, "datastore": ds1}, "ipaddr"},
			{"datastore missing", map[string]any{"ipaddr": "10.0.0.9"}, "datastore"},
			{"datastore unknown", map[string]any{"ipaddr": "10.0.0.9", "datastore": 9999}, "datastore"},
			{"datastore wrong type", map[string]any{"ipaddr": "10.0.0.9", "datastore": "one"}, "datastore"},
			{"duplicate", map[string]any{"ipaddr": "10.1.2.4", "datastore": ds2}, "ipaddr"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/ipaddresses/", tc.body), tc.field)
			})
		}

		checkPermissions(t, e, "plain", "ipaddresses", id, map[string]any{"ipaddr": "10.9.9.9", "datastore": ds1})

		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("ipaddresses", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("ipaddresses", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("ipaddresses", id), nil))
		// A data store takes its addresses with it.
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("datastores", ds2), nil))
		require.Equal(t, float64(0), count("/api/ipaddresses/"))
	})
}
