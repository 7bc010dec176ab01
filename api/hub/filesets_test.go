package hub_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
)

// TestFilesets: a site's filesets are the folders of its spaces, in path
// order, with their state and quota; an unknown or missing site is a 400
// naming site.
func TestFilesets(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		for _, n := range []string{"a", "b", "empty"} {
			requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": n}))
		}
		a := map[string]any{"name": "a", "label": "A"}
		b := map[string]any{"name": "b", "label": "B"}
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "Shared", "mountpoint": "/spaces/shared", "size": 4096, "sites": []any{a, b}})
		requireStatus(t, http.StatusCreated, r)
		shared := recordID(t, r)
		r = e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "Projects", "mountpoint": "/projects/p1", "sites": []any{a}})
		requireStatus(t, http.StatusCreated, r)
		projects := recordID(t, r)

		list := func(site string) []any {
			r := e.AsAdmin(http.MethodGet, "/api/filesets/?site="+site, nil)
			requireStatus(t, http.StatusOK, r)
			return r.JSON().([]any)
		}
		got := list("a")
		require.Len(t, got, 2)
		p, s := got[0].(map[string]any), got[1].(map[string]any)
		require.Equal(t, "p1", p["name"])
		require.Equal(t, "/projects/p1", p["path"])
		require.EqualValues(t, projects, p["space"])
		require.Equal(t, "Projects", p["space_name"])
		require.Equal(t, false, p["cj_space"])
		require.Nil(t, p["quota"])
		require.Equal(t, "a", p["site"])
		require.Equal(t, "pending", p["state"], "no site worker made it yet")
		require.Equal(t, "shared", s["name"])
		require.Equal(t, "/spaces/shared", s["path"])
		require.EqualValues(t, shared, s["space"])
		require.Equal(t, true, s["cj_space"])
		require.EqualValues(t, 4096, s["quota"])

		got = list("b")
		require.Len(t, got, 1)
		require.Equal(t, "/spaces/shared", got[0].(map[string]any)["path"])
		require.Equal(t, "b", got[0].(map[string]any)["site"])
		require.Empty(t, list("empty"))

		// A plain user reads them too (view_space).
		user := apitest.Bearer(e.CreateUser("reader"))
		requireStatus(t, http.StatusOK, e.Do(http.MethodGet, "/api/filesets/?site=a", user, nil))

		requireFieldError(t, e.AsAdmin(http.MethodGet, "/api/filesets/?site=nowhere", nil), "site")
		requireFieldError(t, e.AsAdmin(http.MethodGet, "/api/filesets/", nil), "site")
	})
}
