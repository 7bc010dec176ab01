package hub_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func TestFeatures(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodGet, "/api/features/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(10), r.Map()["count"])
		first := r.Map()["results"].([]any)[0].(map[string]any)
		require.Equal(t, "addon", first["name"], "ordered by name")
		require.ElementsMatch(t, []string{"name", "description", "enabled"}, catKeys(first))

		r = e.AsAdmin(http.MethodGet, "/api/features/search/", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, true, r.Map()["enabled"])

		// Only enabled changes; name and description are read only.
		r = e.AsAdmin(http.MethodPatch, "/api/features/search/", map[string]any{"enabled": false, "name": "x", "description": "y"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, map[string]any{"name": "search", "description": r.Map()["description"], "enabled": false}, r.Map())
		require.NotEqual(t, "y", r.Map()["description"])
		require.Equal(t, false, e.AsAdmin(http.MethodGet, "/api/features/search/", nil).Map()["enabled"])
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodPatch, "/api/features/search/", map[string]any{"enabled": "no"}).Status)

		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/features/teleport/", nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, "/api/features/teleport/", map[string]any{"enabled": true}).Status)

		user := apitest.Bearer(e.CreateUser("fay"))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/features/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, "/api/features/search/", user, map[string]any{"enabled": true}).Status)
	})
}

// catKeys returns a JSON object's member names.
func catKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestFileStatusTypes(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodGet, "/api/filestatustypes/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var order []string
		for _, x := range r.Map()["results"].([]any) {
			order = append(order, x.(map[string]any)["key"].(string))
		}
		require.Equal(t, []string{"resident", "premigrated", "migrated", "recalling", "unknown"}, order)

		r = e.AsAdmin(http.MethodGet, "/api/filestatustypes/migrated/", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, r.Map()["url"], "/api/filestatustypes/migrated/")

		r = e.AsAdmin(http.MethodPatch, "/api/filestatustypes/migrated/", map[string]any{
			"label": "Stub", "background_color": "#112233", "text_color": "#FFFFFF", "key": "other"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "migrated", r.Map()["key"], "key is read only")
		require.Equal(t, "Stub", r.Map()["label"])
		require.Equal(t, "#FFFFFF", e.AsAdmin(http.MethodGet, "/api/filestatustypes/migrated/", nil).Map()["text_color"])

		for body, field := range map[string]string{
			`{"text_color": "white"}`:        "text_color",
			`{"text_color": ""}`:             "text_color",
			`{"text_color": null}`:           "",
			`{"background_color": "#12345"}`: "background_color",
			`{"label": ""}`:                  "label",
			`{"label": 5}`:                   "label",
		} {
			r = e.AsAdmin(http.MethodPatch, "/api/filestatustypes/migrated/", body)
			if field == "" {
				require.Equal(t, http.StatusOK, r.Status, body)
				require.Equal(t, "#FFFFFF", r.Map()["text_color"], "null leaves text_color as it was")
				continue
			}
			require.Equal(t, http.StatusBadRequest, r.Status, body)
			require.Contains(t, r.Map(), field, body)
		}
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/filestatustypes/frozen/", nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, "/api/filestatustypes/frozen/", map[string]any{"label": "x"}).Status)

		user := apitest.Bearer(e.CreateUser("finn"))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/filestatustypes/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, "/api/filestatustypes/migrated/", user, map[string]any{"label": "x"}).Status)
	})
}

func TestCertificateLifetimes(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodGet, "/api/pki/lifetime/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		list := r.JSON().([]any)
		require.Len(t, list, 3, "bare array")
		site := list[1].(map[string]any)
		require.Equal(t, "site", site["name"])
		require.Nil(t, site["updated_at"])
		path := "/api/pki/lifetime/" + catID(site["id"]) + "/"

		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"days": 30, "updated_by": 999, "updated_at": "2000-01-01T00:00:00Z"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(30), r.Map()["days"])
		require.NotNil(t, r.Map()["updated_at"])
		require.NotEqual(t, "2000-01-01T00:00:00Z", r.Map()["updated_at"])
		admin, err := models.GetUser(t.Context(), e.DB, "admin")
		require.NoError(t, err)
		require.Equal(t, float64(admin.ID), r.Map()["updated_by"])
		require.Equal(t, float64(30), e.AsAdmin(http.MethodGet, path, nil).Map()["days"])

		for _, body := range []any{map[string]any{"days": 0}, map[string]any{"days": -3}, map[string]any{"days": 40000}, map[string]any{"days": "ten"}, map[string]any{"days": 1.5}} {
			r = e.AsAdmin(http.MethodPatch, path, body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v", body)
			require.Contains(t, r.Map(), "days")
		}
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/pki/lifetime/99/", nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, "/api/pki/lifetime/99/", map[string]any{"days": 3}).Status)
		// POST /api/pki/site/ is covered by TestIssueSiteCertificate; an empty body is a 400.
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodPost, "/api/pki/site/", map[string]any{}).Status)

		// Certificate lifetimes are for administrators only.
		user := apitest.Bearer(e.CreateUser("pia"))
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/pki/lifetime/", user, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, path, user, map[string]any{"days": 3}).Status)
	})
}

func TestTags(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodGet, "/api/tags/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, []any{}, r.JSON())
		require.NoError(t, models.EnsureTags(t.Context(), e.DB, "Projects", "raw_data", "archive", "projects-2024", "archive", "100%"))
		cases := map[string][]any{
			"":        {"100%", "Projects", "archive", "projects-2024", "raw_data"},
			"proj":    {"Projects", "projects-2024"},
			"ARCH":    {"archive"},
			"_":       {"raw_data"},
			"%":       {"100%"},
			"missing": {},
		}
		user := apitest.Bearer(e.CreateUser("tess"))
		for filter, want := range cases {
			r = e.Do(http.MethodGet, "/api/tags/?filter="+url.QueryEscape(filter), user, nil)
			require.Equal(t, http.StatusOK, r.Status)
			got := []any{}
			for _, x := range r.JSON().([]any) {
				got = append(got, x.(map[string]any)["name"])
			}
			require.ElementsMatch(t, want, got, filter)
		}
		require.Equal(t, http.StatusMethodNotAllowed, e.AsAdmin(http.MethodPost, "/api/tags/", map[string]any{"name": "x"}).Status)
	})
}

// catID formats a JSON id for a path.
func catID(v any) string { return fmt.Sprintf("%d", int64(v.(float64))) }
