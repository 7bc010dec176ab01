package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// analyticsTree writes a tree of chosen sizes, types and ages under
// <root>/proj, makes one file premigrated and one migrated through jobs,
// and returns the ids of the two jobs.
func analyticsTree(t *testing.T, e *apitest.Env, js *jobSite) (premigrate, migrate int64) {
	t.Helper()
	now := time.Now()
	day := 24 * time.Hour
	for _, f := range []struct {
		path         string
		size         int
		mtime, atime time.Duration // ago
	}{
		{"proj/a/big.bin", 2 << 20, 400 * day, 400 * day},
		{"proj/a/small.txt", 100, 0, 0},
		{"proj/a/deep/x.TXT", 5000, 10 * day, 2 * day},
		{"proj/b/empty", 0, 40 * day, 40 * day},
		{"proj/b/mid.dat", 8000, 100 * day, 100 * day},
		{"proj/b/old.dat", 9000, 4 * 365 * day, 4 * 365 * day},
		{"proj/c.txt", 50, 0, 0},
	} {
		abs := filepath.Join(js.root, filepath.FromSlash(f.path))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(strings.Repeat("x", f.size)), 0o644))
		require.NoError(t, os.Chtimes(abs, now.Add(-f.atime), now.Add(-f.mtime)))
	}
	require.NoError(t, os.Symlink("a/small.txt", filepath.Join(js.root, "proj", "link")))
	j1 := runJob(t, e, js.name, "premigrate", []string{"/proj/b/mid.dat", "/proj/b/old.dat"}, nil)
	require.Equal(t, "SUCCESS", j1["state"])
	j2 := runJob(t, e, js.name, "migrate", []string{"/proj/b/old.dat"}, nil)
	require.Equal(t, "SUCCESS", j2["state"])
	return int64(j1["id"].(float64)), int64(j2["id"].(float64))
}

func bucketMap(t *testing.T, page map[string]any, key string) map[string][2]float64 {
	t.Helper()
	out := map[string][2]float64{}
	for _, b := range page[key].([]any) {
		m := b.(map[string]any)
		out[m["key"].(string)] = [2]float64{m["files"].(float64), m["bytes"].(float64)}
	}
	return out
}

// TestAnalytics: GET /analytics/ through HTTP on a tree of chosen sizes,
// types, ages and migration states: totals, every breakdown, the largest
// children paged, cache_ttl, CSV, an offline site (partial answer, or 504
// with raise_exception), and bad input as 400s naming the field.
func TestAnalytics(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		east := newJobSite(t, e, "east")
		_, err := models.EnsureSite(ctx, e.DB, "west") // no worker: offline
		require.NoError(t, err)
		premigrate, migrate := analyticsTree(t, e, east)
		// The jobs' statistics report the bytes of their paths.
		for id, want := range map[int64]float64{premigrate: 17000, migrate: 9000} {
			r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/statistics/", id), nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			require.Equal(t, want, r.Map()["bytes"], string(r.Body))
			require.Equal(t, map[string]any{"SUCCESS": want}, r.Map()["files"].(map[string]any)["bytes_by_state"])
		}
		outside := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
		require.NoError(t, os.Symlink(outside, filepath.Join(east.root, "escape")))

		r := e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj&children=true", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		page := r.Map()
		require.Equal(t, true, page["complete"], page)
		require.Equal(t, false, page["cached"])
		require.Equal(t, "", page["error"])
		require.Equal(t, "/proj", page["path"])
		require.Equal(t, float64(7), page["files"])
		require.Equal(t, float64(3), page["directories"])
		require.Equal(t, float64(1), page["symlinks"])
		require.Equal(t, float64(2119302), page["bytes"], "logical bytes: the stub counts its original size")
		require.Equal(t, map[string][2]float64{"resident": {5, 2102302}, "premigrated": {1, 8000}, "migrated": {1, 9000}},
			bucketMap(t, page, "by_state"))
		require.Equal(t, map[string][2]float64{"0": {1, 0}, "<4KiB": {2, 150}, "4KiB-1MiB": {3, 22000}, "1MiB-100MiB": {1, 2 << 20},
			"100MiB-1GiB": {}, "1GiB-10GiB": {}, ">=10GiB": {}}, bucketMap(t, page, "by_size"))
		require.Equal(t, map[string][2]float64{"<1d": {2, 150}, "1d-7d": {}, "7d-30d": {1, 5000}, "30d-90d": {1, 0},
			"90d-1y": {1, 8000}, "1y-3y": {1, 2 << 20}, ">3y": {1, 9000}}, bucketMap(t, page, "by_mtime"))
		atime := bucketMap(t, page, "by_atime")
		require.Equal(t, [2]float64{1, 2 << 20}, atime["1y-3y"], "big.bin was never read")
		require.Equal(t, [2]float64{1, 5000}, atime["1d-7d"])
		var n float64
		for _, b := range atime {
			n += b[0]
		}
		require.Equal(t, float64(7), n)
		var types []string
		for _, b := range page["by_type"].([]any) {
			types = append(types, b.(map[string]any)["key"].(string))
		}
		require.Equal(t, []string{"bin", "dat", "txt", "(none)"}, types, "by bytes, extensions lower case")
		require.Equal(t, [2]float64{3, 5150}, bucketMap(t, page, "by_type")["txt"])

		// The largest children, paged.
		require.Equal(t, float64(4), page["children_total"])
		require.Equal(t, float64(4), page["count"])
		kids := page["results"].([]any)
		require.Len(t, kids, 4)
		var names []string
		for _, k := range kids {
			names = append(names, k.(map[string]any)["name"].(string))
		}
		require.Equal(t, []string{"a", "b", "c.txt", "link"}, names)
		a := kids[0].(map[string]any)
		require.Equal(t, map[string]any{"name": "a", "path": "/proj/a", "type": "directory", "files": float64(3),
			"directories": float64(1), "bytes": float64(2102252), "mtime": a["mtime"], "analytics": a["analytics"]}, a)
		require.Contains(t, a["analytics"], "/api/analytics/?site=east&path=%2Fproj%2Fa")
		require.Equal(t, "symlink", kids[3].(map[string]any)["type"])
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj&children=true&page=2", nil).Status)
		for i := range 25 {
			require.NoError(t, os.MkdirAll(filepath.Join(east.root, "many"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(east.root, "many", fmt.Sprintf("f%02d", i)), make([]byte, 100+i), 0o644))
		}
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/many&children=true&page=2", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(25), r.Map()["count"])
		require.NotNil(t, r.Map()["previous"])
		names = nil
		for _, k := range r.Map()["results"].([]any) {
			names = append(names, k.(map[string]any)["name"].(string))
		}
		require.Equal(t, []string{"f04", "f03", "f02", "f01", "f00"}, names, "the second page: the smallest")
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Empty(t, r.Map()["results"], "children only when asked")
		require.Equal(t, float64(4), r.Map()["children_total"])

		// cache_ttl reuses a recent answer; without it the site counts again.
		require.NoError(t, os.WriteFile(filepath.Join(east.root, "proj", "new.txt"), []byte("0123456789"), 0o644))
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj&cache_ttl=3600", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, true, r.Map()["cached"])
		require.Equal(t, float64(7), r.Map()["files"])
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj/&cache_ttl=0", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, false, r.Map()["cached"])
		require.Equal(t, float64(8), r.Map()["files"])
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj&cache_ttl=3600", nil)
		require.Equal(t, float64(8), r.Map()["files"], "the newer answer is kept")

		// The same data as CSV, with a file name.
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj&children=true&download=csv", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "text/csv; charset=utf-8", r.Header.Get("Content-Type"))
		require.Regexp(t, `^attachment; filename="analytics-east-proj-\d{8}T\d{6}Z\.csv"$`, r.Header.Get("Content-Disposition"))
		body := string(r.Body)
		require.True(t, strings.HasPrefix(body, "section,key,files,directories,bytes\n"), body)
		for _, line := range []string{"total,/proj,8,3,2119312", "state,resident,6,,2102312", "state,migrated,1,,9000",
			"size,1MiB-100MiB,1,,2097152", "type,bin,1,,2097152", "child,/proj/a,3,1,2102252", "child,/proj/link,0,0,0"} {
			require.Contains(t, body, line+"\n")
		}

		// A file, the root, a missing path, paths that leave the root.
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj/a/big.bin", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(1), r.Map()["files"])
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(8+25), r.Map()["files"], "the root, without the hub's own folder")
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/nope", nil).Status)
		requireField(t, e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/escape/secret", nil), "path")
		requireField(t, e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/.hub", nil), "path")

		// Bad input: a 400 naming the field.
		for field, q := range map[string]string{
			"site":            "path=/",
			"site ":           "site=mars",
			"path":            "site=east&path=/proj/../..",
			"path ":           "site=east&path=proj",
			"custom_timeout":  "site=east&custom_timeout=0",
			"custom_timeout ": "site=east&custom_timeout=ten",
			"cache_ttl":       "site=east&cache_ttl=-1",
			"cache_ttl ":      "site=east&cache_ttl=1.5",
			"children":        "site=east&children=maybe",
			"raise_exception": "site=east&raise_exception=2",
			"download":        "site=east&download=xlsx",
		} {
			requireField(t, e.AsAdmin(http.MethodGet, "/api/analytics/?"+q, nil), strings.TrimSpace(field))
		}

		// An offline site: a partial answer saying so, or 504 when asked to raise.
		begin := time.Now()
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=west&path=/&custom_timeout=2", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Less(t, time.Since(begin), 15*time.Second)
		require.Equal(t, false, r.Map()["complete"])
		require.Nil(t, r.Map()["computed"])
		require.Equal(t, "Site west did not answer within 2 s.", r.Map()["error"])
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=west&path=/&custom_timeout=2&raise_exception=true", nil)
		require.Equal(t, http.StatusGatewayTimeout, r.Status, string(r.Body))
		require.Contains(t, string(r.Body), "did not answer within 2 s")

		// A site that goes offline answers with its last answer, marked.
		east.stopWorker()
		r = e.AsAdmin(http.MethodGet, "/api/analytics/?site=east&path=/proj&custom_timeout=2", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, true, r.Map()["cached"])
		require.Equal(t, false, r.Map()["complete"])
		require.Equal(t, float64(8), r.Map()["files"])
		require.Contains(t, r.Map()["error"], "last answer")
		apitest.RecordHistories(t, e.Temporal)
	})
}

// TestBrowseParameters: the file browser and the space listing honour
// type, restricted, cache_ttl (custom_refresh_period), check_available_sites
// and site, and show each entry's metadata, migration state and remote
// locations.
func TestBrowseParameters(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		east := newJobSite(t, e, "east")
		_, err := models.EnsureSite(ctx, e.DB, "west") // no worker: offline
		require.NoError(t, err)
		analyticsTree(t, e, east)

		names := func(r apitest.Response) []string {
			t.Helper()
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			var out []string
			for _, f := range r.Map()["results"].([]any) {
				out = append(out, f.(map[string]any)["name"].(string))
			}
			return out
		}
		list := func(q string) apitest.Response {
			return e.AsAdmin(http.MethodGet, "/api/file/?site=east&path=/proj&"+q, nil)
		}
		require.Equal(t, []string{"a", "b", "c.txt", "link"}, names(list("")))
		require.Equal(t, []string{"c.txt"}, names(list("type=file")))
		require.Equal(t, []string{"a", "b"}, names(list("type=directory")))
		require.Equal(t, []string{"c.txt", "link"}, names(list("type=file,symlink")))
		require.Equal(t, []string{"link"}, names(list("restricted=true")))
		require.Equal(t, []string{"a", "b", "c.txt"}, names(list("restricted=false")))
		r := list("type=file,symlink&page_size=1")
		require.Equal(t, float64(2), r.Map()["count"], "filtered before paging")
		r = list("restricted=true")
		require.Equal(t, true, r.Map()["results"].([]any)[0].(map[string]any)["restricted"])

		// Migration state, remote locations and metadata of each entry.
		r = e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "east",
			"paths": []string{"/proj/b/mid.dat"}, "metadata": map[string]any{"project": "apollo"}, "tags": []string{"hot"}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodGet, "/api/file/?site=east&path=/proj/b", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		byName := map[string]map[string]any{}
		for _, f := range r.Map()["results"].([]any) {
			byName[f.(map[string]any)["name"].(string)] = f.(map[string]any)
		}
		require.Equal(t, "premigrated", byName["mid.dat"]["status"])
		require.Equal(t, "migrated", byName["old.dat"]["status"])
		require.Equal(t, "resident", byName["empty"]["status"])
		require.Contains(t, byName["mid.dat"]["remote_locations"], "east-fs")
		require.Contains(t, byName["old.dat"]["remote_locations"], "east-fs")
		require.Empty(t, byName["empty"]["remote_locations"])
		require.Equal(t, map[string]any{"project": "apollo", "tags": []any{"hot"}}, byName["mid.dat"]["metadata"])
		require.Equal(t, map[string]any{}, byName["empty"]["metadata"])

		// cache_ttl: a listing kept from the last minute, not the folder now.
		first := list("type=file")
		require.NoError(t, os.WriteFile(filepath.Join(east.root, "proj", "zz.txt"), []byte("z"), 0o644))
		cached := list("type=file&cache_ttl=600")
		require.Equal(t, []string{"c.txt"}, names(cached))
		require.Equal(t, first.Map()["entry"].(map[string]any)["time_refreshed"], cached.Map()["entry"].(map[string]any)["time_refreshed"])
		require.Equal(t, []string{"c.txt", "zz.txt"}, names(list("type=file")))
		require.Equal(t, []string{"c.txt", "zz.txt"}, names(list("type=file&cache_ttl=600")), "the newer listing is kept")

		// A space on two sites, one offline.
		r = e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "proj", "mountpoint": "/proj",
			"sites": []any{map[string]any{"name": "east", "label": "E"}, map[string]any{"name": "west", "label": "W"}}})
		require.Less(t, r.Status, 300, string(r.Body))
		sp := int64(r.Map()["id"].(float64))
		// Asking west would take the whole custom_timeout.
		begin := time.Now()
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/files/?path=/&check_available_sites=true&type=directory&custom_timeout=60", sp), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Less(t, time.Since(begin), 30*time.Second, "the offline site is not waited for")
		var westErr string
		var eastNames []string
		for _, f := range r.Map()["results"].([]any) {
			m := f.(map[string]any)
			if m["site"] == "west" {
				westErr = m["error"].(string)
			} else {
				eastNames = append(eastNames, m["name"].(string))
				require.Equal(t, "/"+m["name"].(string), m["path"])
			}
		}
		require.Equal(t, []string{"a", "b"}, eastNames)
		require.Contains(t, westErr, "Site west is offline")
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/files/?check_available_sites=true&raise_exception=true", sp), nil)
		require.Equal(t, http.StatusGatewayTimeout, r.Status, string(r.Body))
		spaceNames := func(q string) []string {
			return names(e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/files/?site=east&path=/b&%s", sp, q), nil))
		}
		require.NotContains(t, spaceNames(""), "gone.dat")
		require.NoError(t, os.WriteFile(filepath.Join(east.root, "proj", "b", "gone.dat"), []byte("g"), 0o644))
		require.NotContains(t, spaceNames("custom_refresh_period=600"), "gone.dat", "kept listing")
		require.Contains(t, spaceNames("custom_refresh_period=0"), "gone.dat")

		// Bad input names the field.
		requireField(t, list("type=pipe"), "type")
		requireField(t, list("restricted=maybe"), "restricted")
		requireField(t, list("cache_ttl=-5"), "cache_ttl")
		requireField(t, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/files/?custom_refresh_period=x", sp), nil), "custom_refresh_period")
		requireField(t, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/spaces/%d/files/?site=mars", sp), nil), "site")
		requireField(t, e.AsAdmin(http.MethodGet, "/api/file/?path=/", nil), "site")
	})
}

// missedClose is the Temporal client with the server's lost close
// notification: the first wait for each run's result hears nothing for the
// 20 s of a long poll, as seen under load.
type missedClose struct {
	client.Client
	last atomic.Pointer[deafRun]
}

func (c *missedClose) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	run, err := c.Client.ExecuteWorkflow(ctx, o, wf, args...)
	if err != nil {
		return nil, err
	}
	deaf := &deafRun{WorkflowRun: run}
	c.last.Store(deaf)
	return deaf, nil
}

type deafRun struct {
	client.WorkflowRun
	waits, released atomic.Int32 // first waits; those let go before the 20 s
}

func (r *deafRun) Get(ctx context.Context, result any) error {
	if r.waits.Add(1) > 1 {
		return r.WorkflowRun.Get(ctx, result)
	}
	select {
	case <-ctx.Done():
		r.released.Add(1)
		return ctx.Err()
	case <-time.After(20 * time.Second):
		return r.WorkflowRun.Get(ctx, result)
	}
}

// TestListingDespiteAMissedClose: a listing whose workflow has ended is
// answered though the long poll on its close heard nothing: the wait
// notices the close by asking (changes.awaitResult), not after 20 s.
func TestListingDespiteAMissedClose(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		east := newJobSite(t, e, "east")
		require.NoError(t, os.WriteFile(filepath.Join(east.root, "a.txt"), []byte("a"), 0o644))
		runs := &missedClose{Client: e.Temporal}
		e.API.Changes.Temporal = runs
		r := e.AsAdmin(http.MethodGet, "/api/file/?site=east&path=/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Contains(t, string(r.Body), `"a.txt"`)
		last := runs.last.Load()
		require.NotNil(t, last)
		require.Equal(t, int32(1), last.released.Load(), "the deaf wait was stopped, not waited out")
	})
}
