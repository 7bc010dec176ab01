package hub_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	hubapi "github.com/thehub/hub/api/hub"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// TestSitesListShowsEveryChange: the sites list keeps whole pages under
// the sites generation, and whatever changes a site or what its rendering
// reads (the models, a raw UPDATE of a site, a space renamed, links to
// spaces removed and added, a site deleted or inserted with plain SQL),
// every page is then what a server that kept nothing answers. A page is
// kept per host, per query and per caller's right to edit sites.
func TestSitesListShowsEveryChange(t *testing.T) {
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		exec := func(query string, args ...any) {
			t.Helper()
			execSQL(t, e.DB, query, args...)
		}
		names := spaceNames(25)
		for i, name := range append(names, "shared") {
			exec("INSERT INTO spaces (uuid, name, mountpoint, created) VALUES (?, ?, ?, ?)",
				fmt.Sprintf("00000000-0000-0000-0000-%012d", i), name, "/"+name, time.Now().UTC())
		}
		var sites []*models.Site
		for i := range 25 { // two pages of 20
			site, err := models.EnsureSite(ctx, e.DB, fmt.Sprintf("site%02d", i))
			require.NoError(t, err)
			_, _, err = models.SetSiteSpaces(ctx, e.DB, site, []string{names[i], "shared"})
			require.NoError(t, err)
			sites = append(sites, site)
		}
		r := e.AsAdmin(http.MethodPost, "/api/groups/", map[string]any{"name": "Viewers", "permissions": []string{"view_site"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		viewer := e.CreateUser("vera", "Viewers")

		kept := e.API.Handler()
		paths := []string{"/api/sites/", "/api/sites/?page=2", "/api/sites/?page_size=0", "/api/sites/?page_size=21&page=2"}
		same := func() {
			t.Helper()
			for _, host := range []string{"hub.test", "other.test"} {
				for _, token := range []string{e.Admin, viewer} {
					for _, p := range paths {
						require.Equal(t, getAs(t, freshServer(e), host, token, p), getAs(t, kept, host, token, p), "%s%s", host, p)
					}
				}
			}
		}
		same()
		same() // now from what it kept
		require.Contains(t, getAs(t, kept, "other.test", e.Admin, "/api/sites/"), `"url":"http://other.test/api/sites/`)
		require.NotContains(t, getAs(t, kept, "other.test", e.Admin, "/api/sites/"), "hub.test", "links name the host asked")
		require.Contains(t, getAs(t, kept, "hub.test", e.Admin, "/api/sites/"), `"editable":true`)
		require.NotContains(t, getAs(t, kept, "hub.test", viewer, "/api/sites/"), `"editable":true`)

		exec("UPDATE sites SET label = 'relabelled', files_count = 7 WHERE id = ?", sites[3].ID)
		same()
		exec("UPDATE spaces SET name = 'renamed' WHERE name = 'space05'")
		same()
		exec("DELETE FROM space_sites WHERE site_id = ?", sites[7].ID)
		same()
		exec("INSERT INTO space_sites (space_id, site_id) SELECT id, ? FROM spaces WHERE name = 'space09'", sites[8].ID)
		same()
		exec("DELETE FROM space_sites WHERE site_id = ?", sites[2].ID)
		exec("DELETE FROM sites WHERE id = ?", sites[2].ID)
		same()
		exec("INSERT INTO sites (name, label, shortcode, type, timezone, created_at) SELECT 'aaa', 'first', 'aa', type, timezone, created_at FROM sites WHERE id = ?", sites[0].ID)
		same()
		_, err := models.EnsureSite(ctx, e.DB, "zzz")
		require.NoError(t, err)
		same()
		require.Contains(t, getAs(t, kept, "hub.test", e.Admin, "/api/sites/"), `"relabelled"`)
		require.Contains(t, getAs(t, kept, "hub.test", e.Admin, "/api/sites/?page_size=0"), `"renamed"`)
	})
}

// freshServer is the handler of a server of e that has kept nothing yet.
func freshServer(e *apitest.Env) http.Handler {
	return (&hubapi.Server{DB: e.API.DB, Tokens: e.API.Tokens, Changes: e.API.Changes, IDP: e.API.IDP,
		Secrets: e.API.Secrets, Log: e.API.Log}).Handler()
}

// spaceNames are n names of spaces, "space00" on.
func spaceNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("space%02d", i)
	}
	return names
}

// TestSitesListIsNeverOlderThanACommit: the sites list, while a site's
// bandwidth moves (neverOlderThanACommit).
func TestSitesListIsNeverOlderThanACommit(t *testing.T) {
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		site, err := models.EnsureSite(t.Context(), e.DB, "east")
		require.NoError(t, err)
		neverOlderThanACommit(t, e, "/api/sites/", fmt.Sprintf("UPDATE sites SET bandwidth = ? WHERE id = %d", site.ID),
			func(body []byte) (int64, error) {
				var page struct{ Results []struct{ Bandwidth int64 } }
				if err := json.Unmarshal(body, &page); err != nil || len(page.Results) != 1 {
					return 0, fmt.Errorf("%s (%v)", body, err)
				}
				return page.Results[0].Bandwidth, nil
			})
	})
}

// neverOlderThanACommit: while a writer runs update with 1, 2, 3, ...
// (plain SQL, each a commit of its own), three readers ask for path
// through the real HTTP server, which keeps pages (the writer waits for a
// few answers between its commits), and no answer shows a number older
// than the last one committed before it was asked for.
func neverOlderThanACommit(t *testing.T, e *apitest.Env, path, update string, shown func(body []byte) (int64, error)) {
	t.Helper()
	const writes = 150
	var committed, answered atomic.Int64
	g, ctx := errgroup.WithContext(t.Context())
	g.Go(func() error {
		for i := int64(1); i <= writes; i++ {
			if _, err := e.DB.ExecContext(t.Context(), update, i); err != nil {
				return err
			}
			committed.Store(i)
			for i < writes && answered.Load() < 3*i && ctx.Err() == nil {
				runtime.Gosched()
			}
		}
		return nil
	})
	reads := make([]int, 3)
	for r := range reads {
		g.Go(func() error {
			for committed.Load() < writes && ctx.Err() == nil {
				before := committed.Load()
				resp, err := e.DoURL(e.URL, http.MethodGet, path, apitest.Bearer(e.Admin), nil)
				if err != nil {
					return err
				}
				if resp.Status != http.StatusOK {
					return fmt.Errorf("answer %d: %s", resp.Status, resp.Body)
				}
				got, err := shown(resp.Body)
				if err != nil {
					return err
				}
				if got < before {
					return fmt.Errorf("%d shown after %d was committed", got, before)
				}
				reads[r]++
				answered.Add(1)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	for _, n := range reads {
		require.Positive(t, n)
	}
	t.Logf("reads per reader: %v", reads)
}
