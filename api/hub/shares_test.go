package hub_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
)

// bareNames lists a bare-array collection and returns the names.
func bareNames(t *testing.T, e *apitest.Env, path string) []string {
	t.Helper()
	r := e.AsAdmin(http.MethodGet, path, nil)
	requireStatus(t, http.StatusOK, r)
	list, ok := r.JSON().([]any)
	require.True(t, ok, "a bare array: %s", r.Body)
	out := []string{}
	for _, x := range list {
		out = append(out, x.(map[string]any)["name"].(string))
	}
	return out
}

func TestNFSShares(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		sp1 := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "one", "mountpoint": "/spaces/one"}))
		sp2 := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "two", "mountpoint": "/spaces/two"}))

		r := e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{
			"name": "exp1", "space": sp1, "uuid": "mine", "id": 42,
			"clients": []any{
				map[string]any{"hosts": "10.0.0.0/24", "read_only": true, "fsid": 7, "anonymous_user_id": 65534,
					"advanced_settings": map[string]any{"sec": "sys"}, "id": 99, "uuid": "x", "nfs_share": 1234},
				map[string]any{"hosts": "*.example.com", "subtree_check": true},
			},
		})
		requireStatus(t, http.StatusCreated, r)
		sh := r.Map()
		id := recordID(t, r)
		require.NotEqual(t, int64(42), id)
		require.NotEqual(t, "mine", sh["uuid"])
		require.Equal(t, "/spaces/one", sh["path"], "path defaults to the space's mountpoint")
		require.Equal(t, float64(sp1), sh["space"])
		clients := sh["clients"].([]any)
		require.Len(t, clients, 2)
		c0 := clients[0].(map[string]any)
		require.NotEqual(t, float64(99), c0["id"])
		require.NotEqual(t, "x", c0["uuid"])
		require.Len(t, c0["uuid"], 36)
		require.Equal(t, float64(id), c0["nfs_share"])
		require.Equal(t, "10.0.0.0/24", c0["hosts"])
		require.Equal(t, true, c0["read_only"])
		require.Equal(t, float64(7), c0["fsid"])
		require.Equal(t, float64(65534), c0["anonymous_user_id"])
		require.Nil(t, c0["anonymous_group_id"])
		require.Equal(t, map[string]any{"sec": "sys"}, c0["advanced_settings"])
		require.Equal(t, true, clients[1].(map[string]any)["subtree_check"])

		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{
			"name": "exp2", "space": sp2, "path": "/spaces/two/sub", "clients": []any{}}))
		// exp1's fsid, for another folder: one filesystem to the NFS server.
		r = e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{"name": "exp3", "space": sp2,
			"clients": []any{map[string]any{"hosts": "h", "fsid": 7}}})
		requireFieldError(t, r, "clients")
		require.Contains(t, string(r.Body), "fsid 7 is already used by NFS share")
		require.Equal(t, []string{"exp1", "exp2"}, bareNames(t, e, "/api/nfsshares/"))
		require.Equal(t, []string{"exp2"}, bareNames(t, e, fmt.Sprintf("/api/nfsshares/?space=%d", sp2)))
		require.Equal(t, []string{}, bareNames(t, e, "/api/nfsshares/?space=9999"))
		requireFieldError(t, e.AsAdmin(http.MethodGet, "/api/nfsshares/?space=x", nil), "space")

		r = e.AsAdmin(http.MethodGet, pathOf("nfsshares", id), nil)
		requireStatus(t, http.StatusOK, r)
		require.Len(t, r.Map()["clients"], 2)

		// PATCH replaces the clients; other fields are kept.
		r = e.AsAdmin(http.MethodPatch, pathOf("nfsshares", id), map[string]any{"path": "/spaces/one/data",
			"clients": []any{map[string]any{"hosts": "host1", "write_delay": true}}})
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, "/spaces/one/data", r.Map()["path"])
		require.Equal(t, "exp1", r.Map()["name"])
		require.Len(t, r.Map()["clients"], 1)
		require.Equal(t, "host1", r.Map()["clients"].([]any)[0].(map[string]any)["hosts"])
		r = e.AsAdmin(http.MethodPatch, pathOf("nfsshares", id), map[string]any{"name": "renamed"})
		requireStatus(t, http.StatusOK, r)
		require.Len(t, r.Map()["clients"], 1, "clients not sent: unchanged")

		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"space missing", map[string]any{"name": "x"}, "space"},
			{"space unknown", map[string]any{"space": 9999}, "space"},
			{"space wrong type", map[string]any{"space": "one"}, "space"},
			{"path outside the space", map[string]any{"space": sp1, "path": "/spaces/two"}, "path"},
			{"path relative", map[string]any{"space": sp1, "path": "spaces/one"}, "path"},
			{"hosts missing", map[string]any{"space": sp1, "clients": []any{map[string]any{"read_only": true}}}, "clients[0].hosts"},
			{"fsid negative", map[string]any{"space": sp1, "clients": []any{map[string]any{"hosts": "h", "fsid": -1}}}, "clients[0].fsid"},
			{"hosts not exports(5) clients", map[string]any{"space": sp1, "clients": []any{map[string]any{"hosts": "h1, ../../etc"}}}, "clients[0].hosts"},
			{"client bool wrong type", map[string]any{"space": sp1, "clients": []any{map[string]any{"hosts": "h", "read_only": "yes"}}}, "clients.read_only"},
			{"clients wrong type", map[string]any{"space": sp1, "clients": "h"}, "clients"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/nfsshares/", tc.body), tc.field)
			})
		}
		require.Len(t, bareNames(t, e, "/api/nfsshares/"), 2)

		// A shared space cannot be deleted.
		r = e.AsAdmin(http.MethodDelete, pathOf("spaces", sp2), nil)
		requireStatus(t, http.StatusConflict, r)
		require.Contains(t, r.Map()["detail"], "share")
		nested := e.AsAdmin(http.MethodGet, pathOf("spaces", sp1), nil).Map()["nested_shares"].([]any)
		require.Len(t, nested, 1)
		require.Equal(t, "nfs", nested[0].(map[string]any)["type"])

		checkPermissions(t, e, "plain", "nfsshares", id, map[string]any{"space": sp1})

		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("nfsshares", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("nfsshares", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, pathOf("nfsshares", id), map[string]any{}))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("nfsshares", id), nil))
	})
}

func TestSMBShares(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		sp1 := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "one", "mountpoint": "/spaces/one"}))
		sp2 := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "two", "mountpoint": "/spaces/two"}))

		r := e.AsAdmin(http.MethodPost, "/api/smbshares/", map[string]any{
			"name": "Projects", "space": sp1, "read_only": false, "visible": true, "guest_ok": true,
			"create_mask": "0644", "directory_mask": "2775", "hosts_allow": map[string]any{"hosts": []string{"10.0.0.0/8"}},
			"admin_users": map[string]any{"users": []string{"alice"}}, "uuid": "mine", "id": 42,
		})
		requireStatus(t, http.StatusCreated, r)
		sh := r.Map()
		id := recordID(t, r)
		require.NotEqual(t, int64(42), id)
		require.NotEqual(t, "mine", sh["uuid"])
		require.Equal(t, "/spaces/one", sh["path"])
		require.Equal(t, true, sh["visible"])
		require.Equal(t, false, sh["read_only"])
		require.Equal(t, true, sh["guest_ok"])
		require.Equal(t, "2775", sh["directory_mask"])
		require.Equal(t, map[string]any{"hosts": []any{"10.0.0.0/8"}}, sh["hosts_allow"])
		require.Equal(t, map[string]any{}, sh["hosts_deny"])
		for _, f := range []string{"hsm_support", "multi_thread_reads", "multi_thread_writes", "root_share_locking",
			"force_create_mode", "force_directory_mode", "allowed_users", "advanced_settings", "on_sites"} {
			require.Contains(t, sh, f)
		}

		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/smbshares/", map[string]any{
			"name": "Archive", "space": sp2, "read_only": true, "visible": false}))
		require.Equal(t, []string{"Projects", "Archive"}, bareNames(t, e, "/api/smbshares/"))
		require.Equal(t, []string{"Archive"}, bareNames(t, e, fmt.Sprintf("/api/smbshares/?space=%d", sp2)))

		r = e.AsAdmin(http.MethodPatch, pathOf("smbshares", id), map[string]any{"read_only": true, "path": "/spaces/one/x"})
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, true, r.Map()["read_only"])
		require.Equal(t, "/spaces/one/x", r.Map()["path"])
		require.Equal(t, true, r.Map()["visible"], "unchanged")
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodGet, pathOf("smbshares", id), nil))

		req := map[string]any{"space": sp1, "read_only": true, "visible": true}
		with := func(k string, v any) map[string]any {
			b := map[string]any{"name": "n"}
			for kk, vv := range req {
				b[kk] = vv
			}
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
			return b
		}
		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"name missing", with("name", nil), "name"},
			{"name taken", with("name", "Archive"), "name"},
			{"name bad chars", with("name", "a/b"), "name"},
			{"space missing", with("space", nil), "space"},
			{"space unknown", with("space", 9999), "space"},
			{"read_only missing", with("read_only", nil), "read_only"},
			{"visible missing", with("visible", nil), "visible"},
			{"visible wrong type", with("visible", "yes"), "visible"},
			{"bad mask", with("create_mask", "rwx"), "create_mask"},
			{"object wrong type", with("hosts_deny", "all"), "hosts_deny"},
			{"path outside", with("path", "/etc"), "path"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/smbshares/", tc.body), tc.field)
			})
		}
		requireFieldError(t, e.AsAdmin(http.MethodPatch, pathOf("smbshares", id), map[string]any{"name": "Archive"}), "name")

		checkPermissions(t, e, "plain", "smbshares", id, with("name", "p"))

		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("smbshares", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("smbshares", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("smbshares", id), nil))
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("spaces", sp1), nil)) // no share left
	})
}

// TestSharesOnSites: saving a share writes its export line or share
// section into the configuration folder of each site of its space; a site
// joining the space gets the space's shares, one leaving loses them, and
// deleting a share removes its file.
func TestSharesOnSites(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		rootA, rootB := sitesAB(t, e)
		sp := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "proj", "mountpoint": "/spaces/proj",
			"sites": []any{map[string]any{"name": "a", "label": "A"}}}))
		require.NoError(t, os.MkdirAll(filepath.Join(rootA, "spaces", "proj", "sub"), 0o755))
		shareFile := func(root, name string) string { return filepath.Join(root, ".hub", "config", "shares", name) }
		eventuallyFile := func(name, want string) {
			t.Helper()
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(name)
				return err == nil && strings.Contains(string(b), want)
			}, 30*time.Second, 50*time.Millisecond, "%s should hold %q", name, want)
		}
		eventuallyGone := func(name string) {
			t.Helper()
			require.Eventually(t, func() bool { return noFile(name) }, 30*time.Second, 50*time.Millisecond, "%s should be gone", name)
		}

		r := e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{"space": sp, "path": "/spaces/proj/sub", "clients": []any{
			map[string]any{"hosts": "10.0.0.0/24 db1", "read_only": true, "anonymous_user_id": 65534, "advanced_settings": map[string]any{"sec": "sys"}},
			map[string]any{"hosts": "*.example.com", "subtree_check": true, "insecure_ports": true}}})
		requireStatus(t, http.StatusCreated, r)
		nfs := recordID(t, r)
		dir := filepath.Join(rootA, "spaces", "proj", "sub")
		nfsA := shareFile(rootA, fmt.Sprintf("nfs-%d.exports", nfs))
		eventuallyFile(nfsA, fmt.Sprintf("%q 10.0.0.0/24(%[2]s) db1(%[2]s) *.example.com(%[3]s)\n", dir,
			"ro,sync,no_subtree_check,no_wdelay,secure,anonuid=65534,sec=sys", "rw,sync,subtree_check,no_wdelay,insecure"))

		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("nfsshares", nfs), map[string]any{
			"clients": []any{map[string]any{"hosts": "backup"}}}))
		eventuallyFile(nfsA, fmt.Sprintf("%q backup(rw,sync,no_subtree_check,no_wdelay,secure)\n", dir))

		r = e.AsAdmin(http.MethodPost, "/api/smbshares/", map[string]any{"space": sp, "name": "Proj", "read_only": false, "visible": true,
			"create_mask": "0644", "allowed_users": map[string]any{"users": []string{"bob", "alice"}},
			"hosts_allow": map[string]any{"hosts": []string{"10.0.0.0/8"}}, "advanced_settings": map[string]any{"Inherit ACLs": "yes"}})
		requireStatus(t, http.StatusCreated, r)
		smb := recordID(t, r)
		smbName := fmt.Sprintf("smb-%d.conf", smb)
		eventuallyFile(shareFile(rootA, smbName), "[Proj]\n    path = "+filepath.Join(rootA, "spaces", "proj")+"\n    read only = no\n    browseable = yes\n"+
			"    guest ok = no\n    create mask = 0644\n    valid users = alice bob\n    hosts allow = 10.0.0.0/8\n    inherit acls = yes\n")

		// Values that would break the configuration files are refused.
		for _, adv := range []map[string]any{{"x": "a b"}, {"no_root_squash": true}, {"crossmnt": true}, {"nohide": true},
			{"sec": "sys,fsid=0"}, {"mountpoint": "/"}} {
			r = e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{"space": sp, "clients": []any{map[string]any{"hosts": "h", "advanced_settings": adv}}})
			requireStatus(t, http.StatusBadRequest, r)
			require.Contains(t, r.Map(), "clients", string(r.Body))
		}
		for _, c := range []map[string]any{{"hosts": "h", "fsid": 0}, {"hosts": "h", "anonymous_user_id": 0, "force_all_user_id": true}} {
			r = e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{"space": sp, "clients": []any{c}})
			requireStatus(t, http.StatusBadRequest, r)
		}
		// Safe settings real sites use are accepted.
		r = e.AsAdmin(http.MethodPost, "/api/nfsshares/", map[string]any{"space": sp, "clients": []any{map[string]any{"hosts": "h",
			"advanced_settings": map[string]any{"no_all_squash": true, "sec": "krb5p:sys", "acl": true}}}})
		requireStatus(t, http.StatusCreated, r)
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("nfsshares", recordID(t, r)), nil))
		r = e.AsAdmin(http.MethodPost, "/api/smbshares/", map[string]any{"space": sp, "name": "Mac", "read_only": false, "visible": true,
			"allowed_users":     map[string]any{"users": []string{`EXAMPLE\alice`, `@EXAMPLE\staff`}},
			"advanced_settings": map[string]any{"vfs objects": "catia fruit streams_xattr"}})
		requireStatus(t, http.StatusCreated, r)
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("smbshares", recordID(t, r)), nil))
		for _, bad := range []map[string]any{
			{"advanced_settings": map[string]any{"comment": "line\nbreak"}},
			{"advanced_settings": map[string]any{"root preexec": "/bin/sh -c evil"}},
			{"advanced_settings": map[string]any{"Root  PreExec": "/bin/sh"}},
			{"advanced_settings": map[string]any{"include": "/etc/other.conf"}},
			{"advanced_settings": map[string]any{"PATH": "/etc"}},
			{"advanced_settings": map[string]any{"comment": "swallows the next line \\"}},
			{"name": "Global"},
			{"name": "GLOBALS"},
			{"name": "print$"},
			{"name": "IPC$"},
			{"advanced_settings": map[string]any{"posix\nlocking": "no"}},
			{"advanced_settings": map[string]any{"comment": "a\\ "}},
			{"advanced_settings": map[string]any{"comment": "%$(HOME)"}},
			{"advanced_settings": map[string]any{"vfs objects": ""}},
			{"advanced_settings": map[string]any{"vfs objects": "fruit widelinks"}},
			{"name": "Two  Spaces"},
			{"path": "/spaces/proj/a\nb"},
			{"path": "/spaces/proj/%u"},
		} {
			r = e.AsAdmin(http.MethodPatch, pathOf("smbshares", smb), bad)
			requireStatus(t, http.StatusBadRequest, r)
		}
		r = e.AsAdmin(http.MethodPost, "/api/smbshares/", map[string]any{"space": sp, "name": "PROJ", "read_only": false, "visible": true})
		requireStatus(t, http.StatusBadRequest, r)
		require.Contains(t, r.Map(), "name", "Samba compares share names without case")

		// A shared folder reached through a symlink is refused at the
		// site, and the share's earlier definition does not stay in force.
		require.NoError(t, os.Rename(filepath.Join(rootA, "spaces", "proj", "sub"), filepath.Join(rootA, "spaces", "proj", "real")))
		require.NoError(t, os.Symlink("real", filepath.Join(rootA, "spaces", "proj", "sub")))
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("nfsshares", nfs), map[string]any{
			"clients": []any{map[string]any{"hosts": "backup", "read_only": true}}}))
		eventuallyGone(nfsA)
		require.NoError(t, os.Remove(filepath.Join(rootA, "spaces", "proj", "sub")))
		require.NoError(t, os.Rename(filepath.Join(rootA, "spaces", "proj", "real"), filepath.Join(rootA, "spaces", "proj", "sub")))
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("nfsshares", nfs), map[string]any{
			"clients": []any{map[string]any{"hosts": "backup"}}}))
		eventuallyFile(nfsA, fmt.Sprintf("%q backup(rw,sync,no_subtree_check,no_wdelay,secure)\n", dir))

		// Site b joins: it gets the folder and both shares.
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("spaces", sp), map[string]any{
			"sites": []any{map[string]any{"name": "a", "label": "A"}, map[string]any{"name": "b", "label": "B"}}}))
		require.NoError(t, os.MkdirAll(filepath.Join(rootB, "spaces", "proj", "sub"), 0o755))
		eventuallyFile(shareFile(rootB, smbName), "[Proj]")
		eventuallyFile(shareFile(rootB, fmt.Sprintf("nfs-%d.exports", nfs)), "backup(")

		// Deleting a share removes it everywhere; site a leaving loses the other.
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("nfsshares", nfs), nil))
		eventuallyGone(nfsA)
		eventuallyGone(shareFile(rootB, fmt.Sprintf("nfs-%d.exports", nfs)))
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("spaces", sp), map[string]any{
			"sites": []any{map[string]any{"name": "b", "label": "B"}}}))
		eventuallyGone(shareFile(rootA, smbName))
		eventuallyFile(shareFile(rootB, smbName), "[Proj]")

		// Moved to another space on the same site, the share's file stays
		// and follows it: the old space's ops do not remove it.
		other := recordID(t, e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "other", "mountpoint": "/spaces/other",
			"sites": []any{map[string]any{"name": "b", "label": "B"}}}))
		require.Eventually(t, func() bool { return e.AsAdmin(http.MethodGet, pathOf("spaces", other), nil).Map()["is_ready"] == true },
			30*time.Second, 50*time.Millisecond)
		requireStatus(t, http.StatusOK, e.AsAdmin(http.MethodPatch, pathOf("smbshares", smb), map[string]any{"space": other, "path": "/spaces/other"}))
		eventuallyFile(shareFile(rootB, smbName), "path = "+filepath.Join(rootB, "spaces", "other")+"\n")
		for _, id := range []int64{sp, other} {
			var res struct{}
			require.NoError(t, e.Temporal.GetWorkflow(t.Context(), fmt.Sprintf("space-%d", id), "").Get(t.Context(), &res))
		}
		eventuallyFile(shareFile(rootB, smbName), "path = "+filepath.Join(rootB, "spaces", "other")+"\n")
		apitest.RecordHistories(t, e.Temporal)
	})
}
