package cj_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// readFile returns a file's content, "" when it does not exist.
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

func TestSpaceLifecycle(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		tpl, tplData := e.Create("templates", map[string]any{"name": "project",
			"directories": []any{"data/raw", "data/processed", "/docs/", "data/raw"}})
		require.Equal(t, []any{"data/raw", "data/processed", "docs", "data/raw"}, tplData["directories"])
		e.WaitStatus(tpl, models.CJActive)
		step, stepData := e.Create("ilmsteps", map[string]any{"name": "cold", "kind": "migration", "pool": "archive",
			"rule": "ACCESS_AGE > 30"})
		e.WaitStatus(step, models.CJActive)
		prof, _ := e.Create("profiles", map[string]any{"name": "gold", "ilmsteps": []any{"cold"}, "pool": "fast"})
		e.WaitStatus(prof, models.CJActive)

		space, data := e.Create("spaces", map[string]any{"name": "proj-1", "quota": 1 << 30,
			"profile": "gold", "templates": []any{tplData["id"]}, "comment": "first"})
		require.Equal(t, models.CJNew, data["status"], "a new item is NEW")
		require.Equal(t, map[string]any{"name": "gold"}, data["profile"])
		require.Equal(t, "first", data["comment"])
		require.Equal(t, []any{}, data["exposers"], "no exposers yet")
		data = e.WaitStatus(space, models.CJActive)

		dir := filepath.Join(e.Root, "spaces", "proj-1")
		for _, d := range []string{"data/raw", "data/processed", "docs"} {
			fi, err := os.Stat(filepath.Join(dir, d))
			require.NoError(t, err, d)
			require.True(t, fi.IsDir(), d)
		}
		require.Equal(t, "1073741824\n", readFile(t, filepath.Join(e.ConfigDir, "quotas", "proj-1.quota")))
		require.Equal(t, fmt.Sprintf("/* ilmstep cold (C+J item %v), managed by the hub */\n", stepData["id"])+"RULE 'cold' MIGRATE TO POOL 'archive' WHERE ACCESS_AGE > 30\n",
			readFile(t, filepath.Join(e.ConfigDir, "policies", "ilmsteps", "cold.pol")))
		pol := readFile(t, filepath.Join(e.ConfigDir, "policies", "profiles", "gold.pol"))
		require.Contains(t, pol, "RULE 'cold' MIGRATE TO POOL 'archive' WHERE ACCESS_AGE > 30\nRULE 'gold-default' SET POOL 'fast'\n")

		// The log tells the story of the change.
		r := e.Do(http.MethodGet, space+"/log", e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		var msgs []string
		for _, it := range r.Items() {
			msgs = append(msgs, it["message"].(string))
		}
		require.Contains(t, strings.Join(msgs, "\n"), "spaces/proj-1 ready with 3 template directories, quota 1073741824 bytes")

		// An update changes the quota; a null clears it.
		r = e.Do(http.MethodPatch, space, e.Admin, map[string]any{"quota": 2048}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, models.CJPending, r.Item()["status"])
		data = e.WaitStatus(space, models.CJActive)
		require.Equal(t, "2048\n", readFile(t, filepath.Join(e.ConfigDir, "quotas", "proj-1.quota")))
		r = e.Do(http.MethodPatch, space, e.Admin, map[string]any{"quota": nil}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		data = e.WaitStatus(space, models.CJActive)
		require.Equal(t, "", readFile(t, filepath.Join(e.ConfigDir, "quotas", "proj-1.quota")))

		// A profile used by a space cannot go; the space can, and takes its folder along.
		r = e.Do(http.MethodGet, prof, e.Admin, nil)
		r = e.Do(http.MethodDelete, prof, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusConflict, r.Status, string(r.Body))
		r = e.Do(http.MethodDelete, space, e.Admin, nil, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		require.Empty(t, r.Body)
		r = e.Do(http.MethodGet, space, e.Admin, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "a deleted item is gone at once")
		if it := r.Item(); it != nil { // unless the deletion is already done
			require.Equal(t, true, it["_deleted"], "while its deletion runs it shows how far it is")
		}
		r = e.Do(http.MethodGet, "/spaces/", e.Admin, nil)
		require.Empty(t, r.Items(), "nor is it listed")
		e.WaitGone(space)
		require.Eventually(t, func() bool {
			_, err := os.Stat(dir)
			return os.IsNotExist(err)
		}, time.Minute, 50*time.Millisecond)
		apitest.RecordHistories(t, e.Temporal)
	})
}

func TestInjectedFailure(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		// A file where the space's folder should be: a real failure the
		// site refuses without retrying.
		require.NoError(t, os.MkdirAll(filepath.Join(e.Root, "spaces"), 0o755))
		blocker := filepath.Join(e.Root, "spaces", "blocked")
		require.NoError(t, os.WriteFile(blocker, []byte("in the way"), 0o644))

		space, _ := e.Create("spaces", map[string]any{"name": "blocked"})
		data := e.WaitStatus(space, models.CJErrored)
		r := e.Do(http.MethodGet, space, e.Admin, nil)
		var logHref string
		for _, l := range r.Doc().Collection.Items[0].Links {
			if l.Rel == "log" {
				logHref = l.Href
			}
		}
		require.NotEmpty(t, logHref, "an item links to its log")
		r = e.Do(http.MethodGet, logHref, e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		entries := r.Items()
		last := entries[len(entries)-1]
		require.Equal(t, "error", last["level"])
		require.Contains(t, last["message"], "cannot create spaces/blocked: a file is in the way")

		// Once the operator clears the way, an empty PATCH applies it again.
		require.NoError(t, os.Remove(blocker))
		r = e.Do(http.MethodPatch, space, e.Admin, map[string]any{}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		e.WaitStatus(space, models.CJActive)
		fi, err := os.Stat(filepath.Join(e.Root, "spaces", "blocked"))
		require.NoError(t, err)
		require.True(t, fi.IsDir())
		apitest.RecordHistories(t, e.Temporal)
	})
}

func TestExposers(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		space, _ := e.Create("spaces", map[string]any{"name": "shared",
			"exposers": []any{map[string]any{"name": "shared-nfs", "type": "nfs"}}})
		e.WaitStatus(space, models.CJActive)
		dir := filepath.Join(e.Root, "spaces", "shared")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "pub"), 0o755))

		// The space lists the exposer it was created with.
		r := e.Do(http.MethodGet, space, e.Admin, nil)
		exps := r.Item()["exposers"].([]any)
		require.Len(t, exps, 1)
		require.Equal(t, "shared-nfs", exps[0].(map[string]any)["name"])
		require.Equal(t, "nfs", exps[0].(map[string]any)["type"])

		nfsPath := fmt.Sprintf("/exposers/%v", exps[0].(map[string]any)["id"])
		e.WaitStatus(nfsPath, models.CJActive)
		nfsFile := filepath.Join(e.ConfigDir, "exports.d", "shared-nfs.exports")
		require.Contains(t, readFile(t, nfsFile), fmt.Sprintf("%q *(rw,sync,no_subtree_check)\n", dir))

		smb, _ := e.Create("exposers", map[string]any{"type": "cifs", "name": "shared-smb", "space": "shared",
			"path": "pub", "valid_users": []any{"alice", "bob"}})
		data := e.WaitStatus(smb, models.CJActive)
		smbFile := filepath.Join(e.ConfigDir, "smb.d", "shared-smb.conf")
		conf := readFile(t, smbFile)
		require.Contains(t, conf, "[shared-smb]\n    path = "+filepath.Join(dir, "pub")+"\n    read only = no\n    valid users = alice bob\n")

		native, _ := e.Create("exposers", map[string]any{"type": "gpfsnative", "name": "shared-gpfs", "space": "shared"})
		e.WaitStatus(native, models.CJActive)
		require.Contains(t, readFile(t, filepath.Join(e.ConfigDir, "native.d", "shared-gpfs.conf")), "fileset = shared\n")

		// An update rewrites the definition.
		r = e.Do(http.MethodPatch, smb, e.Admin, map[string]any{"read_only": true}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		data = e.WaitStatus(smb, models.CJActive)
		require.Contains(t, readFile(t, smbFile), "read only = yes\n")
		// Fields of another kind of exposer, and immutable ones, are refused.
		r = e.Do(http.MethodPatch, smb, e.Admin, map[string]any{"clients": []any{"*"}, "space": "x"}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		require.Len(t, r.Error().Fields, 2)

		// A space with exposers cannot be deleted; deleting an exposer removes its file.
		r = e.Do(http.MethodGet, space, e.Admin, nil)
		r = e.Do(http.MethodDelete, space, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusConflict, r.Status, string(r.Body))
		for _, tc := range []struct{ path, file string }{{smb, smbFile}, {nfsPath, nfsFile}} {
			r = e.Do(http.MethodGet, tc.path, e.Admin, nil)
			r = e.Do(http.MethodDelete, tc.path, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
			require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
			e.WaitGone(tc.path)
			require.NoFileExists(t, tc.file)
		}
		r = e.Do(http.MethodGet, space, e.Admin, nil)
		require.Len(t, r.Item()["exposers"], 1, "the GPFS exposer is left")
		apitest.RecordHistories(t, e.Temporal)
	})
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		space, _ := e.Create("spaces", map[string]any{"name": "work"})
		e.WaitStatus(space, models.CJActive)
		dir := filepath.Join(e.Root, "spaces", "work")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("version 1"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("bee"), 0o644))
		require.NoError(t, os.Symlink("a.txt", filepath.Join(dir, "link")))

		snap, _ := e.Create("snapshots", map[string]any{"name": "before", "space": "work"})
		e.WaitStatus(snap, models.CJActive)
		snapDir := filepath.Join(e.Root, ".snapshots", "work", "before")

		// Change the space in place (same inode), add and remove files.
		f, err := os.OpenFile(filepath.Join(dir, "a.txt"), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("VERSION 2"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NoError(t, os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new"), 0o644))
		require.NoError(t, os.Remove(filepath.Join(dir, "sub", "b.txt")))

		require.Equal(t, "version 1", readFile(t, filepath.Join(snapDir, "a.txt")))
		require.Equal(t, "bee", readFile(t, filepath.Join(snapDir, "sub", "b.txt")))
		require.NoFileExists(t, filepath.Join(snapDir, "new.txt"))
		target, err := os.Readlink(filepath.Join(snapDir, "link"))
		require.NoError(t, err)
		require.Equal(t, "a.txt", target)
		for _, p := range []string{snapDir, filepath.Join(snapDir, "sub"), filepath.Join(snapDir, "a.txt")} {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.Zero(t, fi.Mode().Perm()&0o222, "%s is read-only", p)
		}

		// Same name in the same space is taken; a space with snapshots stays.
		r := e.Do(http.MethodPost, "/snapshots/", e.Admin, map[string]any{"name": "before", "space": "work"})
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		r = e.Do(http.MethodPost, "/snapshots/", e.Admin, map[string]any{"name": "x", "space": "nope"})
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		require.Equal(t, "space", r.Error().Fields[0].Name)
		r = e.Do(http.MethodGet, space, e.Admin, nil)
		r = e.Do(http.MethodDelete, space, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusConflict, r.Status, string(r.Body))

		r = e.Do(http.MethodGet, snap, e.Admin, nil)
		r = e.Do(http.MethodDelete, snap, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		e.WaitGone(snap)
		require.NoDirExists(t, snapDir)
		apitest.RecordHistories(t, e.Temporal)
	})
}

func TestDatastores(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		r := e.Do(http.MethodGet, "/datastores/", e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		items := r.Items()
		require.Len(t, items, 1)
		ds := items[0]
		require.Equal(t, "system", ds["name"])
		require.Greater(t, ds["capacity"], float64(0))
		require.NotEmpty(t, ds["filesystem"])
		require.Nil(t, r.Doc().Collection.Template, "no create template")
		require.Empty(t, r.Doc().Collection.Templates)

		path := fmt.Sprintf("/datastores/%v", ds["id"])
		r = e.Do(http.MethodGet, path, e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Nil(t, r.Doc().Collection.Template, "no update template")
		// Every item carries links[] (here empty) and an item document its self link.
		var raw struct {
			Collection struct {
				Links []map[string]any
				Items []map[string]json.RawMessage
			}
		}
		require.NoError(t, json.Unmarshal(r.Body, &raw))
		require.JSONEq(t, `[]`, string(raw.Collection.Items[0]["links"]))
		require.Equal(t, "self", raw.Collection.Links[0]["rel"])
		for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodDelete, http.MethodPut} {
			for _, p := range []string{"/datastores/", path} {
				r = e.Do(m, p, e.Admin, map[string]any{"name": "x"}, "If-Match", "*")
				require.Equal(t, http.StatusMethodNotAllowed, r.Status, "%s %s", m, p)
				require.Equal(t, []string{"GET", "HEAD", "OPTIONS"}, r.Allow())
			}
		}
	})
}

// TestJobEngineUnreachable: a change is committed with the hand-over it
// owes its workflow (activities/changes). With Temporal away, the write
// answers as usual and the item waits; once Temporal is back, the
// reconciler delivers it and the change runs, once. A change Temporal can
// never take (here: its namespace does not exist) is a job error: the
// item becomes ERRORED with the cause in its log (a deletion is undone),
// and an empty PATCH retries.
func TestJobEngineUnreachable(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		ctx := context.Background()
		away := apitest.UnreachableTemporal(t)
		e.API.Changes.Temporal = away

		space, data := e.Create("spaces", map[string]any{"name": "later"})
		require.Equal(t, models.CJNew, data["status"], "the change waits for Temporal")
		require.Contains(t, data, "profile", "a space without a profile shows it as null")
		require.Nil(t, data["profile"])
		require.NoDirExists(t, filepath.Join(e.Root, "spaces", "later"))

		// Temporal is back: the reconciler delivers the change, which runs.
		e.API.Changes.Temporal = e.Temporal
		n, err := e.API.Changes.DeliverAsOf(ctx, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		e.WaitStatus(space, models.CJActive)
		require.DirExists(t, filepath.Join(e.Root, "spaces", "later"))
		n, err = e.API.Changes.DeliverAsOf(ctx, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "nothing is owed twice")

		// A change that can never be delivered fails its item.
		never, err := client.NewLazyClient(client.Options{HostPort: apitest.TemporalAddr(t), Namespace: "no-such-namespace"})
		require.NoError(t, err)
		t.Cleanup(never.Close)
		e.API.Changes.Temporal = never
		r := e.Do(http.MethodGet, space, e.Admin, nil)
		r = e.Do(http.MethodDelete, space, e.Admin, nil, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		r = e.Do(http.MethodGet, space, e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "a deletion that can never start is undone")
		require.Equal(t, models.CJErrored, r.Item()["status"])
		r = e.Do(http.MethodGet, space+"/log", e.Admin, nil)
		require.Contains(t, r.Items()[len(r.Items())-1]["message"], "the job engine could not be reached")
		require.DirExists(t, filepath.Join(e.Root, "spaces", "later"))

		// An empty PATCH retries.
		e.API.Changes.Temporal = e.Temporal
		r = e.Do(http.MethodGet, space, e.Admin, nil)
		r = e.Do(http.MethodPatch, space, e.Admin, map[string]any{}, "If-Match", r.Item()["_etag"].(string))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		e.WaitStatus(space, models.CJActive)
	})
}
