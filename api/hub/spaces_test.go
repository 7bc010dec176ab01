package hub_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/worker"
)

func TestSpacesCRUDAndFilters(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		east := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "east"}))
		west := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "west"}))

		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{
			"name": "Projects", "mountpoint": "/spaces/projects", "size": 1 << 30, "permission_mode": "0770",
			"color": []int{1, 2, 3}, "on_sites": map[string]any{"east": map[string]any{"note": "x"}},
			"sites":             []any{map[string]any{"name": "east", "label": "Projects East", "usage": []int{1, 2}, "id": "77", "pool": "p"}},
			"snapshot_schedule": map[string]any{"duration": "7d", "frequency": "daily", "time": "02:30", "id": 99},
			"uuid":              "not-mine", "id": 555, "created": "1999-01-01", "is_ready": true, // read only
		})
		requireStatus(t, http.StatusCreated, r)
		sp := r.Map()
		id := recordID(t, r)
		require.NotEqual(t, int64(555), id)
		require.NotEqual(t, "not-mine", sp["uuid"])
		require.Len(t, sp["uuid"], 36)
		require.Equal(t, "/spaces/projects", sp["mountpoint"])
		require.Equal(t, float64(1<<30), sp["size"])
		require.Equal(t, "0770", sp["permission_mode"])
		require.NotEqual(t, "1999-01-01", sp["created"])
		require.Equal(t, false, sp["immutable"])
		require.Equal(t, true, sp["editable"])
		require.Equal(t, false, sp["is_ready"], "no site worker has created the directory yet")
		require.Equal(t, map[string]any{"east": map[string]any{"note": "x"}}, sp["on_sites"])
		sites := sp["sites"].([]any)
		require.Len(t, sites, 1)
		s0 := sites[0].(map[string]any)
		require.Equal(t, fmt.Sprint(east), s0["id"], "site id, as a string")
		require.Equal(t, "east", s0["name"])
		require.Equal(t, "Projects East", s0["label"])
		require.Equal(t, []any{float64(1), float64(2)}, s0["usage"])
		require.Equal(t, "pending", s0["state"])
		sched := sp["snapshot_schedule"].(map[string]any)
		require.Equal(t, "daily", sched["frequency"])
		require.Equal(t, "02:30", sched["time"])
		require.Equal(t, float64(id), sched["space"])
		require.NotEqual(t, float64(99), sched["id"])
		for _, f := range []string{"url", "nested_shares", "relationships", "color"} {
			require.Contains(t, sp, f)
		}

		other := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{
			"name": "archive", "mountpoint": "/spaces/archive",
			"sites": []any{map[string]any{"name": "west", "label": "Archive"}}}))
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "scratch", "mountpoint": "/scratch"}))

		names := func(path string) []string {
			r := e.AsAdmin(http.MethodGet, path, nil)
			requireStatus(t, http.StatusOK, r)
			var out []string
			for _, x := range r.Map()["results"].([]any) {
				out = append(out, x.(map[string]any)["name"].(string))
			}
			return out
		}
		require.Equal(t, []string{"Projects", "archive", "scratch"}, names("/api/spaces/"))
		require.Equal(t, []string{"Projects"}, names(fmt.Sprintf("/api/spaces/?site_id=%d", east)))
		require.Equal(t, []string{"archive"}, names(fmt.Sprintf("/api/spaces/?site_id=%d", west)))
		require.Equal(t, []string{"Projects"}, names("/api/spaces/?search_keyword=ject"))
		require.Equal(t, []string{"Projects"}, names("/api/spaces/?search_keyword=PROJ"), "case-insensitive")
		require.Empty(t, names("/api/spaces/?search_keyword=%25"), "% is a literal")
		require.Equal(t, []string{"archive"}, names(fmt.Sprintf("/api/spaces/?site_id=%d&search_keyword=arch", west)))
		require.Empty(t, names(fmt.Sprintf("/api/spaces/?site_id=%d&search_keyword=arch", east)))
		requireFieldError(t, e.AsAdmin(http.MethodGet, "/api/spaces/?site_id=abc", nil), "site_id")

		// Detail honours the same filters: a space not matching is 404.
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/?site_id=%d", id, east), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/?site_id=%d", id, west), nil))
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/?search_keyword=proj", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/?search_keyword=zzz", id), nil))

		// PATCH: mountpoint is read only after creation and ignored.
		r = e.AsAdmin(http.MethodPatch, pathOf("spaces", id), map[string]any{"mountpoint": "/elsewhere", "size": nil,
			"snapshot_schedule": nil, "sites": []any{map[string]any{"name": "east", "label": "P"}, map[string]any{"name": "west", "label": "P"}}})
		requireStatus(t, http.StatusOK, r)
		sp = r.Map()
		require.Equal(t, "/spaces/projects", sp["mountpoint"])
		require.Nil(t, sp["size"], "null: as large as the system allows")
		require.Nil(t, sp["snapshot_schedule"])
		require.Len(t, sp["sites"], 2)
		require.Equal(t, "Projects", sp["name"])

		checkPermissions(t, e, "plain", "spaces", id, map[string]any{"name": "x", "mountpoint": "/x"})

		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("spaces", other), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("spaces", other), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("spaces", other), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, pathOf("spaces", other), map[string]any{}))
	})
}

func TestSpaceValidation(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "east"}))
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "taken", "mountpoint": "/spaces/taken"}))
		ok := func(extra map[string]any) map[string]any {
			b := map[string]any{"name": "n", "mountpoint": "/spaces/n"}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"name missing", map[string]any{"mountpoint": "/a"}, "name"},
			{"name taken", ok(map[string]any{"name": "taken"}), "name"},
			{"name wrong type", ok(map[string]any{"name": 3}), "name"},
			{"mountpoint missing", map[string]any{"name": "n"}, "mountpoint"},
			{"mountpoint relative", ok(map[string]any{"mountpoint": "spaces/n"}), "mountpoint"},
			{"mountpoint root", ok(map[string]any{"mountpoint": "/"}), "mountpoint"},
			{"mountpoint dotdot", ok(map[string]any{"mountpoint": "/a/../b"}), "mountpoint"},
			{"mountpoint reserved", ok(map[string]any{"mountpoint": "/.hub/x"}), "mountpoint"},
			{"mountpoint of the snapshots", ok(map[string]any{"mountpoint": "/.snapshots/lab"}), "mountpoint"},
			{"mountpoint over the snapshots", ok(map[string]any{"mountpoint": "/.snapshots"}), "mountpoint"},
			{"mountpoint taken", ok(map[string]any{"mountpoint": "/spaces/taken"}), "mountpoint"},
			{"mountpoint nested", ok(map[string]any{"mountpoint": "/spaces/taken/sub"}), "mountpoint"},
			{"mountpoint wrong type", ok(map[string]any{"mountpoint": 1}), "mountpoint"},
			{"size negative", ok(map[string]any{"size": -1}), "size"},
			{"size wrong type", ok(map[string]any{"size": "big"}), "size"},
			{"color range", ok(map[string]any{"color": []int{256}}), "color"},
			{"immutable wrong type", ok(map[string]any{"immutable": "yes"}), "immutable"},
			{"on_sites wrong type", ok(map[string]any{"on_sites": []int{1}}), "on_sites"},
			{"site unknown", ok(map[string]any{"sites": []any{map[string]any{"name": "nope", "label": "x"}}}), "sites[0].name"},
			{"site name missing", ok(map[string]any{"sites": []any{map[string]any{"label": "x"}}}), "sites[0].name"},
			{"site label missing", ok(map[string]any{"sites": []any{map[string]any{"name": "east"}}}), "sites[0].label"},
			{"site twice", ok(map[string]any{"sites": []any{map[string]any{"name": "east", "label": "a"}, map[string]any{"name": "east", "label": "b"}}}), "sites[1].name"},
			{"usage wrong type", ok(map[string]any{"sites": []any{map[string]any{"name": "east", "label": "x", "usage": "a"}}}), "sites.usage"},
			{"schedule duration missing", ok(map[string]any{"snapshot_schedule": map[string]any{"frequency": "daily", "time": "01:00"}}), "snapshot_schedule.duration"},
			{"schedule frequency missing", ok(map[string]any{"snapshot_schedule": map[string]any{"duration": "7d", "time": "01:00"}}), "snapshot_schedule.frequency"},
			{"schedule time missing", ok(map[string]any{"snapshot_schedule": map[string]any{"duration": "7d", "frequency": "daily"}}), "snapshot_schedule.time"},
			{"schedule time bad", ok(map[string]any{"snapshot_schedule": map[string]any{"duration": "7d", "frequency": "daily", "time": "25:99"}}), "snapshot_schedule.time"},
			{"schedule wrong type", ok(map[string]any{"snapshot_schedule": "daily"}), "snapshot_schedule"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/spaces/", tc.body), tc.field)
			})
		}
		require.Equal(t, float64(1), e.AsAdmin(http.MethodGet, "/api/spaces/", nil).Map()["count"])
	})
}

// TestSpaceImmutable: an immutable space can be neither updated nor deleted (409).
func TestSpaceImmutable(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		id := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "default", "mountpoint": "/default", "immutable": true}))
		r := e.AsAdmin(http.MethodGet, pathOf("spaces", id), nil)
		require.Equal(t, true, r.Map()["immutable"])
		require.Equal(t, false, r.Map()["editable"])
		r = e.AsAdmin(http.MethodPatch, pathOf("spaces", id), map[string]any{"immutable": false})
		requireStatus(t, http.StatusConflict, r)
		require.Contains(t, r.Map()["detail"], "immutable")
		requireStatus(t, http.StatusConflict, e.AsAdmin(http.MethodDelete, pathOf("spaces", id), nil))
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("spaces", id), nil))

		mutable := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "m", "mountpoint": "/m"}))
		r = e.AsAdmin(http.MethodPatch, pathOf("spaces", mutable), map[string]any{"immutable": true})
		requireStatus(t, http.StatusOK, r)
		requireStatus(t, http.StatusConflict, e.AsAdmin(http.MethodPatch, pathOf("spaces", mutable), map[string]any{"name": "z"}))
	})
}

// TestSpaceDirectories: creating a space makes its directory on each of
// its sites; deleting it removes an empty directory and keeps one with data.
func TestSpaceDirectories(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		rootA, rootB := sitesAB(t, e)
		both := []any{map[string]any{"name": "a", "label": "A"}, map[string]any{"name": "b", "label": "B"}}
		// Outside /spaces/: a space of the hub API alone, whose folder its
		// SpaceWorkflow makes and removes (spaces_shared_test.go has the
		// spaces both APIs share).
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "team", "mountpoint": "/projects/team", "sites": both, "permission_mode": "0750"})
		requireStatus(t, http.StatusCreated, r)
		id := recordID(t, r)
		dirA, dirB := filepath.Join(rootA, "projects", "team"), filepath.Join(rootB, "projects", "team")
		require.Eventually(t, func() bool {
			r := e.AsAdmin(http.MethodGet, pathOf("spaces", id), nil).Map()
			return r["is_ready"] == true
		}, 30*time.Second, 100*time.Millisecond)
		for _, d := range []string{dirA, dirB} {
			fi, err := os.Stat(d)
			require.NoError(t, err)
			require.True(t, fi.IsDir())
			require.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
		}
		for _, s := range e.AsAdmin(http.MethodGet, pathOf("spaces", id), nil).Map()["sites"].([]any) {
			require.Equal(t, "ready", s.(map[string]any)["state"])
		}

		// Data at one site: that directory survives the deletion.
		require.NoError(t, os.WriteFile(filepath.Join(dirB, "keep.txt"), []byte("precious"), 0o644))
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("spaces", id), nil))
		require.Eventually(t, func() bool {
			_, err := os.Stat(dirA)
			return os.IsNotExist(err)
		}, 30*time.Second, 100*time.Millisecond)
		var res struct {
			Outcomes []struct{ Outcome, Message string }
		}
		require.NoError(t, e.Temporal.GetWorkflow(t.Context(), fmt.Sprintf("space-%d", id), "").Get(t.Context(), &res))
		data, err := os.ReadFile(filepath.Join(dirB, "keep.txt"))
		require.NoError(t, err)
		require.Equal(t, "precious", string(data))
		var kept []string
		for _, o := range res.Outcomes {
			if o.Outcome == "kept" {
				kept = append(kept, o.Message)
			}
		}
		require.Len(t, kept, 1, "%+v", res)
		require.Contains(t, kept[0], "not empty")

		// A C+J space named N and a hub space with mountpoint /spaces/N
		// share one directory; an existing directory is reused untouched.
		require.NoError(t, os.MkdirAll(filepath.Join(rootA, "spaces", "shared"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(rootA, "spaces", "shared", "f"), []byte("x"), 0o644))
		r = e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "shared", "mountpoint": "/spaces/shared",
			"sites": []any{map[string]any{"name": "a", "label": "A"}}})
		requireStatus(t, http.StatusCreated, r)
		sid := recordID(t, r)
		require.Eventually(t, func() bool {
			return e.AsAdmin(http.MethodGet, pathOf("spaces", sid), nil).Map()["is_ready"] == true
		}, 30*time.Second, 100*time.Millisecond)
		_, err = os.Stat(filepath.Join(rootA, "spaces", "shared", "f"))
		require.NoError(t, err)
	})
}

// sitesAB starts the hub worker and sites "a" and "b", each with a
// worker over its own root, and returns the roots.
func sitesAB(t *testing.T, e *apitest.Env) (rootA, rootB string) {
	e.StartHubWorker()
	rootA, rootB = t.TempDir(), t.TempDir()
	e.StartSiteWorker(worker.SiteConfig{Site: "a", Queue: "default", Node: "n1", Root: rootA, HeartbeatInterval: time.Second})
	e.StartSiteWorker(worker.SiteConfig{Site: "b", Queue: "default", Node: "n1", Root: rootB, HeartbeatInterval: time.Second})
	for _, n := range []string{"a", "b"} {
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": n}))
	}
	return rootA, rootB
}
