package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// twoSites returns two sites with workers and a filesystem target both
// can reach.
func twoSites(t *testing.T, e *apitest.Env) (src, dst *jobSite) {
	src, dst = newJobSite(t, e, "src"), newJobSite(t, e, "dst")
	ctx := context.Background()
	a, err := models.GetSiteByName(ctx, e.DB, "src")
	require.NoError(t, err)
	b, err := models.GetSiteByName(ctx, e.DB, "dst")
	require.NoError(t, err)
	shared := &models.ExternalTarget{Name: "a-shared", StorageType: "filesystem", LocalFileRegex: "^$", Enabled: true}
	shared.MigrationTargetFolder = t.TempDir()
	require.NoError(t, models.SaveExternalTarget(ctx, e.DB, shared, []int64{a.ID, b.ID}))
	return src, dst
}

func requireSameTree(t *testing.T, files map[string][]byte, root string) {
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		require.NoError(t, err, p)
		require.True(t, bytes.Equal(want, got), "%s differs", p)
	}
}

func TestJobSendHydrateAndStub(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	files := makeTree(t, src.root, 60)

	job := runJob(t, e, "src", "send", []string{"/data"}, map[string]any{"destination_site": "dst", "hydrate": true})
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	requireSameTree(t, files, dst.root)

	// Without hydrate the destination gets stubs that recall there.
	require.NoError(t, os.RemoveAll(filepath.Join(dst.root, "data")))
	job = runJob(t, e, "src", "send", []string{"/data"}, map[string]any{"destination_site": "dst", "hydrate": false})
	require.Equal(t, "SUCCESS", job["state"], job)
	for p := range files {
		fi, err := os.Stat(filepath.Join(dst.root, filepath.FromSlash(p)))
		require.NoError(t, err)
		require.Zero(t, fi.Size(), "%s should be a stub", p)
	}
	job = runJob(t, e, "dst", "recall", []string{"/data"}, nil)
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, float64(len(files)), job["numprocessedfiles"], job)
	requireSameTree(t, files, dst.root)
}

func TestJobSiteSync(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	files := makeTree(t, src.root, 40)
	sync := func() map[string]any {
		return runJob(t, e, "src", "site_sync", []string{"/data"}, map[string]any{"destination_site": "dst", "sync_preference": "ignore"})
	}
	job := sync()
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	requireSameTree(t, files, dst.root)

	// Change the source: update, delete, move; the next sync mirrors it.
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	upd, del, mv := paths[0], paths[1], paths[2]
	files[upd] = []byte("updated content")
	require.NoError(t, os.WriteFile(filepath.Join(src.root, filepath.FromSlash(upd)), files[upd], 0o644))
	require.NoError(t, os.Remove(filepath.Join(src.root, filepath.FromSlash(del))))
	delete(files, del)
	moved := "/data/moved.bin"
	require.NoError(t, os.Rename(filepath.Join(src.root, filepath.FromSlash(mv)), filepath.Join(src.root, "data", "moved.bin")))
	files[moved] = files[mv]
	delete(files, mv)

	job = sync()
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	require.Equal(t, float64(3), job["numfiles"], "only the three changes are transferred")
	requireSameTree(t, files, dst.root)
	_, err := os.Stat(filepath.Join(dst.root, filepath.FromSlash(del)))
	require.True(t, os.IsNotExist(err), "deleted at the destination too")
	_, err = os.Stat(filepath.Join(dst.root, filepath.FromSlash(mv)))
	require.True(t, os.IsNotExist(err), "moved away at the destination too")
}

// TestSiteSyncNewestDeletes: with the default sync_preference (newest) a
// file deleted at the source goes at the destination when the destination
// holds the version the source deleted, and stays when the destination
// changed it since the last sync (the source's deletion carries the
// deleted version's size and mtime).
func TestSiteSyncNewestDeletes(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	files := makeTree(t, src.root, 10)
	sync := func() map[string]any {
		return runJob(t, e, "src", "site_sync", []string{"/data"}, map[string]any{"destination_site": "dst"})
	}
	require.Equal(t, "SUCCESS", sync()["state"])
	requireSameTree(t, files, dst.root)

	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	gone, edited := paths[0], paths[1]
	for _, p := range []string{gone, edited} {
		require.NoError(t, os.Remove(filepath.Join(src.root, filepath.FromSlash(p))))
	}
	later := time.Now().Add(time.Hour)
	mine := filepath.Join(dst.root, filepath.FromSlash(edited))
	require.NoError(t, os.WriteFile(mine, []byte("saved at the destination"), 0o644))
	require.NoError(t, os.Chtimes(mine, later, later))

	job := sync()
	require.Equal(t, "SUCCESS", job["state"], job)
	_, err := os.Stat(filepath.Join(dst.root, filepath.FromSlash(gone)))
	require.True(t, os.IsNotExist(err), "the unchanged copy is deleted")
	got, err := os.ReadFile(mine)
	require.NoError(t, err)
	require.Equal(t, "saved at the destination", string(got), "the newer copy is kept")
}

// TestSiteSyncOfAnUnmountedPath: a managed path that vanished at the
// source (a filesystem not mounted) is not synced as deleted whole: the
// replica at the destination stays.
func TestSiteSyncOfAnUnmountedPath(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	files := makeTree(t, src.root, 5)
	fields := map[string]any{"destination_site": "dst", "sync_preference": "ignore"}
	require.Equal(t, "SUCCESS", runJob(t, e, "src", "site_sync", []string{"/data"}, fields)["state"])
	require.NoError(t, os.Rename(filepath.Join(src.root, "data"), filepath.Join(src.root, "data.away")))

	job := runJob(t, e, "src", "site_sync", []string{"/data"}, fields)
	require.Equal(t, "FAILURE", job["state"], job)
	require.Contains(t, job["error"], "/data is missing (not mounted?)")
	require.Equal(t, float64(0), job["numfiles"], job)
	requireSameTree(t, files, dst.root)
}

// TestSiteSyncNeverDestroysDestinationData: with sync_preference local a
// move onto a path the destination has keeps the destination's file, and
// a renamed directory syncs (its children report already moved).
func TestSiteSyncNeverDestroysDestinationData(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	files := makeTree(t, src.root, 20)
	sync := func(pref string) map[string]any {
		return runJob(t, e, "src", "site_sync", []string{"/data"}, map[string]any{"destination_site": "dst", "sync_preference": pref})
	}
	require.Equal(t, "SUCCESS", sync("local")["state"])
	requireSameTree(t, files, dst.root)

	// The destination has its own file where the source will move one.
	mine := []byte("destination's own data")
	require.NoError(t, os.WriteFile(filepath.Join(dst.root, "data", "new.bin"), mine, 0o644))
	var moved string
	for p := range files {
		moved = p
		break
	}
	require.NoError(t, os.Rename(filepath.Join(src.root, filepath.FromSlash(moved)), filepath.Join(src.root, "data", "new.bin")))
	job := sync("local")
	require.Equal(t, "SUCCESS", job["state"], job)
	got, err := os.ReadFile(filepath.Join(dst.root, "data", "new.bin"))
	require.NoError(t, err)
	require.Equal(t, mine, got, "the destination's file is kept")

	// A renamed directory: the directory moves, its children are already there.
	require.NoError(t, os.Rename(filepath.Join(src.root, "data", "d01"), filepath.Join(src.root, "data", "d01-renamed")))
	job = sync("ignore")
	require.Equal(t, "SUCCESS", job["state"], job)
	require.Equal(t, false, job["has_failures"], job)
	_, err = os.Stat(filepath.Join(dst.root, "data", "d01-renamed"))
	require.NoError(t, err)
}

func TestSendRefusesBadDestination(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	_, err := models.EnsureSite(context.Background(), e.DB, "here")
	require.NoError(t, err)
	for _, dest := range []string{"here", "nowhere"} {
		r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "here", "workflow": "send",
			"paths": []string{"/a"}, "fields": map[string]any{"destination_site": dest}})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", dest, r.Body)
		require.Contains(t, r.Map(), "fields.destination_site")
	}

	// A destination path from a runtime field is checked as job paths are.
	_, err = models.EnsureSite(context.Background(), e.DB, "there")
	require.NoError(t, err)
	r := e.AsAdmin(http.MethodPost, "/api/workflows/", map[string]any{"name": "sendto", "label": "Send to",
		"fields": map[string]any{"dest_path": map[string]any{"type": "text", "label": "Folder there"}},
		"filter_rules": []any{map[string]any{"action": []any{map[string]any{"name": "send",
			"params": map[string]any{"destination_site": "there", "destination_path": "$dest_path"}}}}}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	for _, bad := range []string{"../x", "x", "/a/../../b"} {
		r = e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "here", "workflow": "sendto",
			"paths": []string{"/a"}, "fields": map[string]any{"dest_path": bad}})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", bad, r.Body)
		require.Contains(t, r.Map(), "fields.dest_path", bad)
	}
}

// TestSendAfterDestinationRename: a send keeps its destination site by
// the id it had when the job was made. The first run is cancelled while
// the destination's worker is away, the destination site is renamed (its
// worker then serves the new name), and the resubmitted job sends there.
func TestSendAfterDestinationRename(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	files := makeTree(t, src.root, 20)
	dst.stopWorker()
	r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "src", "workflow": "send", "paths": []string{"/data"},
		"fields": map[string]any{"destination_site": "dst", "hydrate": true}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	id := int64(r.Map()["job"].(float64))
	require.Eventually(t, func() bool { return jobState(e, id)["state"] == "STARTED" }, time.Minute, 20*time.Millisecond)
	r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/cancel/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	require.Equal(t, "CANCELLED", waitJob(t, e, id)["state"])

	site, err := models.GetSiteByName(context.Background(), e.DB, "dst")
	require.NoError(t, err)
	r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/sites/%d/", site.ID), map[string]any{"name": "dst-renamed"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	dst.name = "dst-renamed"
	dst.startWorker()

	r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	job := waitJob(t, e, id)
	require.Equal(t, "SUCCESS", job["state"], job)
	requireSameTree(t, files, dst.root)
}

// TestMoveKeepsWhatTheDestinationFailed: a user-defined "move" (send, then
// delete with its remote copy) removes at the source only what the
// destination received. A file the destination fails (a folder stands at
// its path there) stays at the source, and the job reports the failure.
// Before, the delete went by the source's own journal of the send, where
// every file it premigrated counts as done, and removed the source's only
// copy of a file the destination never got.
func TestMoveKeepsWhatTheDestinationFailed(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	src, dst := twoSites(t, e)
	for _, name := range []string{"moved.txt", "kept.txt"} {
		require.NoError(t, os.MkdirAll(filepath.Join(src.root, "data"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src.root, "data", name), []byte("the only copy of "+name), 0o644))
	}
	blocker := filepath.Join(dst.root, "data", "kept.txt")
	require.NoError(t, os.MkdirAll(blocker, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(blocker, "inside"), []byte("a folder at the file's path"), 0o644))

	r := e.AsAdmin(http.MethodPost, "/api/workflows/", map[string]any{"name": "move", "label": "Move", "discovery": "recursive",
		"filter_rules": []any{map[string]any{"type": "file", "state": "any", "action": []any{
			map[string]any{"name": "send", "params": map[string]any{"destination_site": "dst", "hydrate": true}},
			map[string]any{"name": "delete", "params": map[string]any{"remote": true}},
		}}}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	job := runJob(t, e, "src", "move", []string{"/data"}, nil)
	require.Equal(t, true, job["has_failures"], job)

	got, err := os.ReadFile(filepath.Join(dst.root, "data", "moved.txt"))
	require.NoError(t, err)
	require.Equal(t, "the only copy of moved.txt", string(got))
	_, err = os.Stat(filepath.Join(src.root, "data", "moved.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "moved")
	got, err = os.ReadFile(filepath.Join(src.root, "data", "kept.txt"))
	require.NoError(t, err, "the destination failed it: it stays at the source")
	require.Equal(t, "the only copy of kept.txt", string(got))
}
