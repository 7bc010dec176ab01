package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sys/unix"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// startSearch posts a search and returns its id.
func startSearch(t *testing.T, e *apitest.Env, body map[string]any) int64 {
	t.Helper()
	r := e.AsAdmin(http.MethodPost, "/api/search/", body)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	return int64(r.Map()["id"].(float64))
}

// searchSites maps each site of a search page to its status.
func searchSites(page map[string]any) map[string]string {
	out := map[string]string{}
	for _, s := range page["search"].(map[string]any)["sites"].([]any) {
		m := s.(map[string]any)
		out[m["site"].(string)] = m["status"].(string)
	}
	return out
}

func waitSearch(t *testing.T, e *apitest.Env, id int64, query string, done func(page map[string]any) bool) map[string]any {
	t.Helper()
	var page map[string]any
	require.Eventually(t, func() bool {
		r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/search/%d/%s", id, query), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		page = r.Map()
		return done(page)
	}, 2*time.Minute, 100*time.Millisecond, "search %d", id)
	return page
}

func searchComplete(page map[string]any) bool {
	return page["search"].(map[string]any)["complete"].(bool)
}

func requireField(t *testing.T, r apitest.Response, field string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Body)
	_, ok := r.Map()[field]
	require.True(t, ok, "the error names %s: %s", field, r.Body)
}

// TestSearchTwoSitesOneOffline: a search of two sites, one without a
// worker, answers from the live site at once, keeps the offline one
// pending, then ends partial with it timed out; results page, sort and
// group by name; metadata set through the API is searchable; bad input is
// a 400 naming the field; DELETE stops a running search and removes it.
func TestSearchTwoSitesOneOffline(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		east := newJobSite(t, e, "east")
		_, err := models.EnsureSite(ctx, e.DB, "west") // no worker: offline
		require.NoError(t, err)
		files := makeTree(t, east.root, 120)
		require.NoError(t, os.WriteFile(filepath.Join(east.root, "data", "f0001.bin"), []byte("same name, other folder"), 0o644))

		// Metadata and tags on files of a site.
		r := e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "east",
			"paths": []string{"/data/d00/e0/f0000.bin", "/data/d01/e1/f0001.bin"}, "metadata": map[string]any{"project": "apollo"},
			"tags": []string{"hot"}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		res := r.Map()["results"].([]any)
		require.Len(t, res, 2)
		require.Equal(t, map[string]any{"project": "apollo"}, res[0].(map[string]any)["metadata"])
		b := make([]byte, 64)
		n, err := unix.Getxattr(filepath.Join(east.root, "data/d00/e0/f0000.bin"), "user.hub.meta.project", b)
		require.NoError(t, err, "metadata is kept with the file")
		require.Equal(t, "apollo", string(b[:n]))
		r = e.AsAdmin(http.MethodGet, "/api/search/metadata_fields/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, []any{map[string]any{"name": "project"}}, r.Map()["results"])
		r = e.AsAdmin(http.MethodGet, "/api/tags/?filter=HO", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, []any{map[string]any{"name": "hot"}}, r.JSON())

		// Bad input: a 400 naming the field.
		for field, body := range map[string]map[string]any{
			"filters.name":       {"filters": map[string]any{"name": "a/b"}},
			"filters.size":       {"filters": map[string]any{"size": map[string]any{"min": 5, "max": 1}}},
			"filters.type":       {"filters": map[string]any{"type": []string{"pipe"}}},
			"filters.state":      {"filters": map[string]any{"state": []string{"lost"}}},
			"filters.mtime":      {"filters": map[string]any{"mtime": map[string]any{"after": "yesterday"}}},
			"filters":            {"filters": map[string]any{"colour": "red"}},
			"sites[0]":           {"sites": []string{"nowhere"}},
			"path":               {"path": "/data/../../etc"},
			"timeout":            {"timeout": 99999},
			"metadata_fields[0]": {"metadata_fields": []string{"bad field"}},
		} {
			requireField(t, e.AsAdmin(http.MethodPost, "/api/search/", body), field)
		}
		requireField(t, e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "east", "paths": []string{"/../x"}, "tags": []string{"a"}}), "paths[0]")
		requireField(t, e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "mars", "paths": []string{"/x"}, "tags": []string{"a"}}), "site")
		requireField(t, e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "east", "paths": []string{"/x"}, "tags": []string{"a,b"}}), "tags")
		requireField(t, e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "east", "paths": []string{"/x"}}), "metadata")

		// Both sites (the default); the live one answers while the other
		// is still pending, then the search ends partial.
		id := startSearch(t, e, map[string]any{"path": "/data", "filters": map[string]any{"name": "*.bin", "type": []string{"file"}},
			"metadata_fields": []string{"project", "tags"}, "timeout": 8})
		page := waitSearch(t, e, id, "?page_size=0", func(p map[string]any) bool { return searchSites(p)["east"] == "answered" })
		if !searchComplete(page) {
			require.Equal(t, "pending", searchSites(page)["west"], "the offline site is still waited for")
		}
		require.Equal(t, float64(len(files)+1), page["count"], "results of the live site are readable before the search ends")
		page = waitSearch(t, e, id, "?page_size=20&sort=-size,path", searchComplete)
		require.Equal(t, map[string]string{"east": "answered", "west": "timed_out"}, searchSites(page))
		for _, s := range page["search"].(map[string]any)["sites"].([]any) {
			if m := s.(map[string]any); m["site"] == "west" {
				require.Contains(t, m["error"], "did not answer")
			} else {
				require.NotNil(t, m["index_scanned"])
			}
		}
		results := page["results"].([]any)
		require.Len(t, results, 20, "page_size is at least 20")
		sizes := make([]float64, len(results))
		for i, x := range results {
			sizes[i] = x.(map[string]any)["size"].(float64)
			require.Equal(t, "east", x.(map[string]any)["site"])
		}
		require.True(t, sort.SliceIsSorted(sizes, func(i, j int) bool { return sizes[i] > sizes[j] }), "sorted by -size: %v", sizes)
		require.NotNil(t, page["next"])

		// Group by name: f0001.bin is in two folders of east.
		page = waitSearch(t, e, id, "?group_by_name=true&sort=-count,name", searchComplete)
		require.Equal(t, float64(len(files)), page["count"])
		first := page["results"].([]any)[0].(map[string]any)
		require.Equal(t, "f0001.bin", first["name"])
		require.Equal(t, float64(2), first["count"])
		require.Equal(t, []any{"east"}, first["sites"])
		requireField(t, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/search/%d/?sort=colour", id), nil), "sort")

		// Metadata and tags filter, and come back when asked for.
		id2 := startSearch(t, e, map[string]any{"sites": []string{"east"}, "filters": map[string]any{"metadata": map[string]any{"project": "apollo"}, "tags": []string{"hot"}},
			"metadata_fields": []string{"*"}})
		page = waitSearch(t, e, id2, "", searchComplete)
		require.Equal(t, float64(2), page["count"], string(fmt.Sprint(page)))
		got := page["results"].([]any)[0].(map[string]any)
		require.Equal(t, "/data/d00/e0/f0000.bin", got["path"])
		require.Equal(t, map[string]any{"project": "apollo", "tags": []any{"hot"}}, got["metadata"])
		require.Equal(t, "resident", got["status"])

		// A job's change shows in the index without a scan.
		job := runJob(t, e, "east", "migrate", []string{"/data/d00/e0/f0000.bin"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		id3 := startSearch(t, e, map[string]any{"sites": []string{"east"}, "filters": map[string]any{"state": []string{"migrated"}}})
		page = waitSearch(t, e, id3, "", searchComplete)
		require.Equal(t, float64(1), page["count"])
		require.Equal(t, "/data/d00/e0/f0000.bin", page["results"].([]any)[0].(map[string]any)["path"])

		// The cap: search_max_results.
		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"search_max_results": 7})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		id4 := startSearch(t, e, map[string]any{"sites": []string{"east"}})
		page = waitSearch(t, e, id4, "", searchComplete)
		require.Equal(t, float64(7), page["count"])
		require.Equal(t, true, page["search"].(map[string]any)["truncated"])

		// DELETE stops a running search (the offline site keeps it
		// running) and removes it.
		id5 := startSearch(t, e, map[string]any{"sites": []string{"west"}, "timeout": 600})
		require.Equal(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, fmt.Sprintf("/api/search/%d/", id5), nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/search/%d/", id5), nil).Status)
		require.Eventually(t, func() bool {
			d, err := e.Temporal.DescribeWorkflowExecution(ctx, workflows.SearchWorkflowID(id5), "")
			return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CANCELED
		}, 30*time.Second, 100*time.Millisecond)
		n5, err := e.DB.NewSelect().Model((*models.SearchResult)(nil)).Where("search_id = ?", id5).Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n5)

		// Another user does not see the admin's searches.
		other := e.CreateUser("searcher")
		require.Equal(t, http.StatusNotFound, e.Do(http.MethodGet, fmt.Sprintf("/api/search/%d/", id), apitest.Bearer(other), nil).Status)

		// The maintenance pass removes searches older than search_result_ttl days.
		_, err = e.DB.NewUpdate().Model((*models.Search)(nil)).Set("created_at = ?", time.Now().Add(-8*24*time.Hour)).Where("id = ?", id).Exec(ctx)
		require.NoError(t, err)
		_, err = (&hubact.Activities{DB: e.DB}).Maintain(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/search/%d/", id), nil).Status)
		nr, err := e.DB.NewSelect().Model((*models.SearchResult)(nil)).Where("search_id = ?", id).Count(ctx)
		require.NoError(t, err)
		require.Zero(t, nr)
		require.Equal(t, http.StatusOK, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/search/%d/", id2), nil).Status, "a recent search stays")
		apitest.RecordHistories(t, e.Temporal)
	})
}

// TestSearchMetadataTravelsWithSend: metadata set on the source is on the
// destination's copy after a send, as xattrs and in its search answers.
func TestSearchMetadataTravelsWithSend(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	makeTree(t, src.root, 20)
	r := e.AsAdmin(http.MethodPatch, "/api/search/metadata/", map[string]any{"site": "src",
		"paths": []string{"/data/d03/e0/f0003.bin", "/data/d03"}, "metadata": map[string]any{"owner": "ada"}, "tags": []string{"keep"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	job := runJob(t, e, "src", "send", []string{"/data"}, map[string]any{"destination_site": "dst", "hydrate": true})
	require.Equal(t, "SUCCESS", job["state"], job)
	b := make([]byte, 64)
	n, err := unix.Getxattr(filepath.Join(dst.root, "data/d03/e0/f0003.bin"), "user.hub.meta.owner", b)
	require.NoError(t, err, "metadata travelled with the file")
	require.Equal(t, "ada", string(b[:n]))
	n, err = unix.Getxattr(filepath.Join(dst.root, "data/d03"), "user.hub.tags", b)
	require.NoError(t, err, "and with the folder")
	require.Equal(t, `["keep"]`, string(b[:n]))
	// Metadata that arrived by other means (a restore, setfattr) is found
	// by the scan too, and joins the hub's lists of fields and tags.
	found := filepath.Join(dst.root, "data/d01/e1/f0001.bin")
	require.NoError(t, unix.Setxattr(found, "user.hub.meta.project", []byte("apollo"), 0))
	require.NoError(t, unix.Setxattr(found, "user.hub.tags", []byte(`["restored"]`), 0))
	// An operator's scan (what a Temporal Schedule runs) rebuilds the
	// destination's index; the metadata is read back from the files.
	run, err := e.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.ScanFileIndexWorkflowID("dst"),
		TaskQueue: workflows.HubTaskQueue}, workflows.ScanFileIndexWorkflowName, workflows.ScanFileIndexInput{Site: "dst"})
	require.NoError(t, err)
	var scan site.ScanFileIndexOutput
	require.NoError(t, run.Get(context.Background(), &scan))
	require.Greater(t, scan.Entries, int64(20))
	require.False(t, scan.Index.Scanned.IsZero())
	require.Contains(t, scan.MetadataFields, "project")
	r = e.AsAdmin(http.MethodGet, "/api/search/metadata_fields/", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"project"`, "a field found by the scan is listed")
	r = e.AsAdmin(http.MethodGet, "/api/tags/?filter=rest", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"restored"`, "a tag found by the scan is listed")
	id := startSearch(t, e, map[string]any{"sites": []string{"dst"}, "filters": map[string]any{"tags": []string{"keep"}}, "metadata_fields": []string{"owner"}})
	page := waitSearch(t, e, id, "", searchComplete)
	require.Equal(t, float64(2), page["count"], fmt.Sprint(page))
	require.Equal(t, map[string]any{"owner": "ada"}, page["results"].([]any)[1].(map[string]any)["metadata"])
	apitest.RecordHistories(t, e.Temporal)
}
