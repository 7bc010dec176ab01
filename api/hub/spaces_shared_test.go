package hub_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/cj"
	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// One space, two APIs (docs/spaces-one-object.md): a space at
// /spaces/<name> made, changed or deleted through the hub API or the
// storage-management (C+J) API is seen at once through the other, and no
// deletion through either leaves a record of the other pointing at a
// folder that is gone.

// startCJ serves the C+J API for site over e's database and Temporal
// namespace and returns a cjtest.Env to talk to it as admin.
func startCJ(t *testing.T, e *apitest.Env, site string) *cjtest.Env {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer((&cj.Server{DB: e.DB, Tokens: e.API.Tokens, Changes: e.API.Changes, Site: site, Log: log}).Handler())
	t.Cleanup(srv.Close)
	oauth := httptest.NewServer((&auth.OAuth2Server{DB: e.DB, Tokens: e.API.Tokens, Log: log}).Handler())
	t.Cleanup(oauth.Close)
	c := &cjtest.Env{T: t, DB: e.DB, URL: srv.URL, AuthURL: oauth.URL}
	c.Admin = c.Token("admin", apitest.AdminPassword)
	return c
}

// cjSpace returns the C+J space named name (nil when none is visible)
// and its path.
func cjSpace(t *testing.T, c *cjtest.Env, name string) (map[string]any, string) {
	t.Helper()
	r := c.Do(http.MethodGet, "/spaces/?where="+url.QueryEscape(fmt.Sprintf(`{"name": %q}`, name)), c.Admin, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	items := r.Items()
	if len(items) == 0 {
		return nil, ""
	}
	require.Len(t, items, 1)
	return items[0], fmt.Sprintf("/spaces/%v", items[0]["id"])
}

// hubSpace returns the hub API space named name, nil when there is none.
func hubSpace(t *testing.T, e *apitest.Env, name string) map[string]any {
	t.Helper()
	r := e.AsAdmin(http.MethodGet, "/api/spaces/?search_keyword="+url.QueryEscape(name), nil)
	requireStatus(t, http.StatusOK, r)
	for _, s := range r.Map()["results"].([]any) {
		if m := s.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

func waitReady(t *testing.T, e *apitest.Env, id int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		return e.AsAdmin(http.MethodGet, pathOf("spaces", id), nil).Map()["is_ready"] == true
	}, time.Minute, 50*time.Millisecond, "space %d never ready", id)
}

// cjWrite sends a PATCH or DELETE with the item's current etag.
func cjWrite(t *testing.T, c *cjtest.Env, method, path string, body any) cjtest.Response {
	t.Helper()
	cur := c.Do(http.MethodGet, path, c.Admin, nil)
	require.Equal(t, http.StatusOK, cur.Status, string(cur.Body))
	return c.Do(method, path, c.Admin, body, "If-Match", cur.Header.Get("ETag"))
}

func requireGone(t *testing.T, p string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := os.Lstat(p)
		return os.IsNotExist(err)
	}, time.Minute, 50*time.Millisecond, "%s is still there", p)
}

func readQuota(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".hub", "config", "quotas", name+".quota"))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func TestOneSpaceThroughBothAPIs(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		rootA, _ := sitesAB(t, e)
		c := startCJ(t, e, "a")
		siteA := []any{map[string]any{"name": "a", "label": "A"}}

		// Made through the hub API: the C+J API sees it at once, and its
		// change makes the folder (with the hub's mode) and the quota.
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "Alpha", "mountpoint": "/spaces/alpha",
			"size": 1000, "permission_mode": "0750", "sites": siteA})
		requireStatus(t, http.StatusCreated, r)
		alpha := recordID(t, r)
		item, alphaPath := cjSpace(t, c, "alpha")
		require.NotNil(t, item, "the C+J API sees the hub API's new space at once")
		require.EqualValues(t, 1000, item["quota"])
		require.Equal(t, map[string]any{"id": float64(alpha), "name": "Alpha"}, item["hub_space"])
		c.WaitStatus(alphaPath, models.CJActive)
		waitReady(t, e, alpha)
		fi, err := os.Stat(filepath.Join(rootA, "spaces", "alpha"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
		require.Equal(t, "1000", readQuota(t, rootA, "alpha"))

		// Made through the C+J API: the hub API sees it at once.
		betaPath, _ := c.Create("spaces", map[string]any{"name": "beta", "quota": 2000})
		hb := hubSpace(t, e, "beta")
		require.NotNil(t, hb, "the hub API sees the C+J API's new space at once")
		require.Equal(t, "/spaces/beta", hb["mountpoint"])
		require.EqualValues(t, 2000, hb["size"])
		require.Len(t, hb["sites"], 1)
		require.Equal(t, "a", hb["sites"].([]any)[0].(map[string]any)["name"])
		beta := int64(hb["id"].(float64))
		c.WaitStatus(betaPath, models.CJActive)
		waitReady(t, e, beta)

		// A quota changed through one is the other's at once.
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("spaces", alpha), map[string]any{"size": 5000}))
		item, _ = cjSpace(t, c, "alpha")
		require.EqualValues(t, 5000, item["quota"])
		c.WaitStatus(alphaPath, models.CJActive)
		require.Equal(t, "5000", readQuota(t, rootA, "alpha"))
		require.Equal(t, http.StatusAccepted, cjWrite(t, c, http.MethodPatch, betaPath, map[string]any{"quota": 7000}).Status)
		require.EqualValues(t, 7000, hubSpace(t, e, "beta")["size"])
		c.WaitStatus(betaPath, models.CJActive)

		// So is a profile.
		c.Create("ilmsteps", map[string]any{"name": "fast", "kind": "placement", "pool": "ssd"})
		c.Create("profiles", map[string]any{"name": "gold", "ilmsteps": []any{"fast"}})
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("spaces", alpha), map[string]any{"profile": "gold"}))
		item, _ = cjSpace(t, c, "alpha")
		require.Equal(t, map[string]any{"name": "gold"}, item["profile"])
		require.Equal(t, http.StatusAccepted, cjWrite(t, c, http.MethodPatch, betaPath, map[string]any{"profile": "gold"}).Status)
		require.Equal(t, "gold", hubSpace(t, e, "beta")["profile"])
		requireFieldError(t, e.AsAdmin(http.MethodPatch, pathOf("spaces", alpha), map[string]any{"profile": "nope"}), "profile")
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("spaces", alpha), map[string]any{"profile": nil}))
		item, _ = cjSpace(t, c, "alpha")
		require.Nil(t, item["profile"])
		c.WaitStatus(alphaPath, models.CJActive)
		c.WaitStatus(betaPath, models.CJActive)

		// Deleting through the hub API while a C+J exposer uses the folder:
		// refused, both records and the folder stay.
		expPath, _ := c.Create("exposers", map[string]any{"name": "alpha-nfs", "type": "nfs", "space": "alpha"})
		c.WaitStatus(expPath, models.CJActive)
		r = e.AsAdmin(http.MethodDelete, pathOf("spaces", alpha), nil)
		requireStatus(t, http.StatusConflict, r)
		require.Contains(t, r.Map()["detail"], "alpha-nfs")
		r = e.AsAdmin(http.MethodPatch, pathOf("spaces", alpha), map[string]any{"sites": []any{}})
		requireStatus(t, http.StatusConflict, r)
		require.Contains(t, r.Map()["detail"], "alpha-nfs")
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("spaces", alpha), nil))
		item, _ = cjSpace(t, c, "alpha")
		require.NotNil(t, item)
		require.DirExists(t, filepath.Join(rootA, "spaces", "alpha"))

		// Deleting through the C+J API while a hub share uses the folder:
		// refused, both records and the folder stay.
		r = e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{"space": beta, "clients": []any{}})
		requireStatus(t, http.StatusCreated, r)
		share := recordID(t, r)
		cr := cjWrite(t, c, http.MethodDelete, betaPath, nil)
		require.Equal(t, http.StatusConflict, cr.Status, string(cr.Body))
		require.Contains(t, cr.Error().Message, "NFS share")
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("spaces", beta), nil))
		item, _ = cjSpace(t, c, "beta")
		require.NotNil(t, item)
		require.DirExists(t, filepath.Join(rootA, "spaces", "beta"))

		// Free of users, deleted through the hub API: gone from both at
		// once; the item's change removes the (empty) folder and its quota.
		require.Equal(t, http.StatusNoContent, cjWrite(t, c, http.MethodDelete, expPath, nil).Status)
		c.WaitGone(expPath)
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("spaces", alpha), nil))
		item, _ = cjSpace(t, c, "alpha")
		require.Nil(t, item, "the C+J API no longer lists it")
		c.WaitGone(alphaPath)
		requireGone(t, filepath.Join(rootA, "spaces", "alpha"))
		require.Empty(t, readQuota(t, rootA, "alpha"))

		// Free of users, deleted through the C+J API: gone from both.
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("nfsshares", share), nil))
		require.Equal(t, http.StatusNoContent, cjWrite(t, c, http.MethodDelete, betaPath, nil).Status)
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("spaces", beta), nil))
		c.WaitGone(betaPath)
		requireGone(t, filepath.Join(rootA, "spaces", "beta"))

		// Data is never destroyed: a folder with data deleted through the
		// hub API stays in place, through the C+J API goes to the trash.
		r = e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "gamma", "mountpoint": "/spaces/gamma", "sites": siteA})
		requireStatus(t, http.StatusCreated, r)
		gamma := recordID(t, r)
		waitReady(t, e, gamma)
		require.NoError(t, os.WriteFile(filepath.Join(rootA, "spaces", "gamma", "keep.txt"), []byte("precious"), 0o644))
		_, gammaPath := cjSpace(t, c, "gamma")
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("spaces", gamma), nil))
		c.WaitGone(gammaPath)
		data, err := os.ReadFile(filepath.Join(rootA, "spaces", "gamma", "keep.txt"))
		require.NoError(t, err)
		require.Equal(t, "precious", string(data))

		deltaPath, _ := c.Create("spaces", map[string]any{"name": "delta"})
		c.WaitStatus(deltaPath, models.CJActive)
		require.NoError(t, os.WriteFile(filepath.Join(rootA, "spaces", "delta", "keep.txt"), []byte("precious"), 0o644))
		require.Equal(t, http.StatusNoContent, cjWrite(t, c, http.MethodDelete, deltaPath, nil).Status)
		require.Nil(t, hubSpace(t, e, "delta"))
		c.WaitGone(deltaPath)
		requireGone(t, filepath.Join(rootA, "spaces", "delta"))
		trashed, err := filepath.Glob(filepath.Join(rootA, ".hub", "trash", "delta-*", "keep.txt"))
		require.NoError(t, err)
		require.Len(t, trashed, 1)
	})
}

// TestOneSpaceNamesAndSites: a C+J space whose name or folder another hub
// space holds is refused (422 on name); a hub space's second site gets its
// own C+J item, and a site leaving drops it.
func TestOneSpaceNamesAndSites(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		_, _ = sitesAB(t, e)
		ca, cb := startCJ(t, e, "a"), startCJ(t, e, "b")

		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "taken", "mountpoint": "/projects/taken"}))
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "outer", "mountpoint": "/spaces/outer/inner"}))
		for _, name := range []string{"taken", "outer"} {
			r := ca.Do(http.MethodPost, "/spaces/", ca.Admin, map[string]any{"name": name})
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
			require.Equal(t, "name", r.Doc().Collection.Error.Fields[0].Name, string(r.Body))
			item, _ := cjSpace(t, ca, name)
			require.Nil(t, item)
		}

		// Two sites: one item on each, kept at the same quota.
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "two", "mountpoint": "/spaces/two", "size": 10,
			"sites": []any{map[string]any{"name": "a", "label": "A"}, map[string]any{"name": "b", "label": "B"}}})
		requireStatus(t, http.StatusCreated, r)
		two := recordID(t, r)
		waitReady(t, e, two)
		_, pathB := cjSpace(t, cb, "two")
		require.Equal(t, http.StatusAccepted, cjWrite(t, cb, http.MethodPatch, pathB, map[string]any{"quota": 20}).Status)
		itemA, _ := cjSpace(t, ca, "two")
		require.EqualValues(t, 20, itemA["quota"], "the other site's item takes the quota")
		require.EqualValues(t, 20, e.AsAdmin(http.MethodGet, pathOf("spaces", two), nil).Map()["size"])

		// Deleting it through site b's C+J API takes only b out.
		cb.WaitStatus(pathB, models.CJActive)
		require.Equal(t, http.StatusNoContent, cjWrite(t, cb, http.MethodDelete, pathB, nil).Status)
		sites := e.AsAdmin(http.MethodGet, pathOf("spaces", two), nil).Map()["sites"].([]any)
		require.Len(t, sites, 1)
		require.Equal(t, "a", sites[0].(map[string]any)["name"])
		cb.WaitGone(pathB)

		// Site b joins again through the hub API (PATCH of the site): its item is back.
		siteB, err := models.GetSiteByName(t.Context(), e.DB, "b")
		require.NoError(t, err)
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("sites", siteB.ID), map[string]any{"spaces": []any{"two"}}))
		itemB, pathB := cjSpace(t, cb, "two")
		require.NotNil(t, itemB)
		require.EqualValues(t, 20, itemB["quota"])
		cb.WaitStatus(pathB, models.CJActive)
		waitReady(t, e, two)
	})
}

// TestOneSpaceDeleteSurvivesTheHubKilled: the hub process serving a DELETE
// of a space both APIs share dies (SIGKILL) right after the commit, before
// it could hand the folder's removal to Temporal. Both records are gone
// together, the removal is owed; the reconciler delivers it, and the
// folder goes once: record and folder agree.
func TestOneSpaceDeleteSurvivesTheHubKilled(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		rootA, _ := sitesAB(t, e)
		c := startCJ(t, e, "a")
		r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "doomed", "mountpoint": "/spaces/doomed", "size": 100,
			"sites": []any{map[string]any{"name": "a", "label": "A"}}})
		requireStatus(t, http.StatusCreated, r)
		id := recordID(t, r)
		waitReady(t, e, id)
		_, itemPath := cjSpace(t, c, "doomed")
		c.WaitStatus(itemPath, models.CJActive)
		dir := filepath.Join(rootA, "spaces", "doomed")
		require.DirExists(t, dir)

		url := e.StartAPIProcess("HUB_FAULT_POINT=changes.committed@1")
		_, err := e.DoURL(url, http.MethodDelete, pathOf("spaces", id), apitest.Bearer(e.Admin), nil)
		require.Error(t, err, "the process died before answering")

		// Committed together: neither API shows the space, the folder is
		// still there, and its removal is owed.
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("spaces", id), nil))
		item, _ := cjSpace(t, c, "doomed")
		require.Nil(t, item)
		require.DirExists(t, dir)
		var kinds []string
		for _, in := range owed(t, e) {
			kinds = append(kinds, in.Kind)
		}
		require.Contains(t, kinds, "cj.change", "the item's removal is owed")

		require.Positive(t, deliverAll(t, e))
		c.WaitGone(itemPath)
		requireGone(t, dir)
		require.Empty(t, readQuota(t, rootA, "doomed"))
		n, err := e.DB.NewSelect().Model((*models.CJItem)(nil)).Where("type = ? AND name = ?", models.CJSpaces, "doomed").Count(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "no record of the folder is left")
		require.Empty(t, owed(t, e))
	})
}

// TestOneSidedSpacesPaired: a C+J space whose hub API space is missing (a
// record written before the APIs shared spaces) is given one by the
// maintenance pass, once; the folder is untouched.
func TestOneSidedSpacesPaired(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		rootA, _ := sitesAB(t, e)
		c := startCJ(t, e, "a")
		path, _ := c.Create("spaces", map[string]any{"name": "legacy", "quota": 3000})
		c.WaitStatus(path, models.CJActive)
		hs := hubSpace(t, e, "legacy")
		require.NotNil(t, hs)
		// Make it one-sided, as a record of before was.
		id := int64(hs["id"].(float64))
		_, err := e.DB.NewDelete().Model((*models.SpaceSite)(nil)).Where("space_id = ?", id).Exec(ctx)
		require.NoError(t, err)
		_, err = e.DB.NewDelete().Model((*models.Space)(nil)).Where("id = ?", id).Exec(ctx)
		require.NoError(t, err)
		require.Nil(t, hubSpace(t, e, "legacy"))

		res, err := (&hubact.Activities{DB: e.DB}).Maintain(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.PairedSpaces)
		hs = hubSpace(t, e, "legacy")
		require.NotNil(t, hs, "the hub API sees the C+J space again")
		require.Equal(t, "/spaces/legacy", hs["mountpoint"])
		require.EqualValues(t, 3000, hs["size"])
		require.Equal(t, "a", hs["sites"].([]any)[0].(map[string]any)["name"])
		item, _ := cjSpace(t, c, "legacy")
		require.Equal(t, hs["id"], item["hub_space"].(map[string]any)["id"], "one object again")
		_, err = os.Stat(filepath.Join(rootA, "spaces", "legacy"))
		require.NoError(t, err, "the folder is untouched")

		res, err = (&hubact.Activities{DB: e.DB}).Maintain(ctx)
		require.NoError(t, err)
		require.Zero(t, res.PairedSpaces, "a second pass has nothing to pair")
	})
}
