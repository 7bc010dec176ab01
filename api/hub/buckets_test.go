package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

const (
	testAccessKey = "plain-access-key-123"
	testKeyID     = "AKIDPLAINKEYID456"
	testSecretKey = "plain-secret-access-key-789"
	testCredValue = "plain-credentials-json-value"
)

// secretBody is a bucket or target body with every secret input set.
func secretBody(fields map[string]any) map[string]any {
	b := map[string]any{"access_key": testAccessKey, "access_key_id": testKeyID, "secret_access_key": testSecretKey,
		"credentials_json": map[string]any{"private_key": testCredValue}}
	for k, v := range fields {
		b[k] = v
	}
	return b
}

// requireSealed reads a row's secret columns raw: none holds plaintext,
// each opens to its value with the hub's key.
func requireSealed(t *testing.T, e *apitest.Env, table string, id int64) {
	t.Helper()
	var ak, akid, sak, cj string
	require.NoError(t, e.DB.NewSelect().Table(table).
		Column("access_key_enc", "access_key_id_enc", "secret_access_key_enc", "credentials_json_enc").
		Where("id = ?", id).Scan(context.Background(), &ak, &akid, &sak, &cj))
	for _, raw := range []string{ak, akid, sak, cj} {
		require.NotEmpty(t, raw)
		for _, plain := range []string{testAccessKey, testKeyID, testSecretKey, testCredValue} {
			require.NotContains(t, raw, plain)
		}
	}
	got, err := e.Secrets.Open(vocab.SecretColumn(table, vocab.SecretSecretAccessKey), sak)
	require.NoError(t, err)
	require.Equal(t, testSecretKey, got)
	got, err = e.Secrets.Open(vocab.SecretColumn(table, vocab.SecretCredentialsJSON), cj)
	require.NoError(t, err)
	require.JSONEq(t, `{"private_key":"`+testCredValue+`"}`, got)
	_, err = e.Secrets.Open(vocab.SecretColumn("elsewhere", vocab.SecretSecretAccessKey), sak)
	require.Error(t, err, "a sealed value is bound to its column")
}

func requireNoTestSecrets(t *testing.T, r apitest.Response) {
	t.Helper()
	requireNoSecret(t, r, testAccessKey, testKeyID, testSecretKey, testCredValue)
	for _, f := range models.SecretFields {
		require.NotContains(t, string(r.Body), `"`+f+`"`, "secret field %s in %s", f, r.Body)
	}
}

func TestBuckets(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.AsAdmin(http.MethodPost, "/api/buckets/", secretBody(map[string]any{
			"name": "archive-1", "label": "Archive", "storage_type": "s3", "endpoint": "s3.example.com", "port": 9000,
			"scheme": "https", "region": "eu-west-1", "container": "c", "storage_account": "sa",
			"migration_target_folder": "hub/", "advanced_settings": map[string]any{"multipart": true},
			"credentials_file": "/etc/aws", "soft_deleting": true, "external_targets": []int{5}, "id": 1234,
		}))
		requireStatus(t, http.StatusCreated, r)
		requireNoTestSecrets(t, r)
		id := recordID(t, r)
		require.NotEqual(t, int64(1234), id)
		b := r.Map()
		require.Equal(t, "archive-1", b["name"])
		require.Equal(t, float64(9000), b["port"])
		require.Equal(t, true, b["ssl_verify"], "default")
		require.Equal(t, false, b["soft_deleting"], "read only")
		require.Equal(t, []any{}, b["external_targets"])
		require.Equal(t, map[string]any{"multipart": true}, b["advanced_settings"])
		requireSealed(t, e, "buckets", id)

		for _, path := range []string{pathOf("buckets", id), "/api/buckets/"} {
			r = e.AsAdmin(http.MethodGet, path, nil)
			requireStatus(t, http.StatusOK, r)
			requireNoTestSecrets(t, r)
		}

		r = e.AsAdmin(http.MethodPatch, pathOf("buckets", id), map[string]any{"region": "us-east-1", "port": nil, "ssl_verify": false})
		requireStatus(t, http.StatusOK, r)
		require.Equal(t, "us-east-1", r.Map()["region"])
		require.Nil(t, r.Map()["port"])
		require.Equal(t, false, r.Map()["ssl_verify"])
		requireSealed(t, e, "buckets", id) // secrets not sent: kept

		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": "b2", "storage_type": "filesystem"}))
		require.Equal(t, float64(2), e.AsAdmin(http.MethodGet, "/api/buckets/", nil).Map()["count"])

		cases := []struct {
			name  string
			body  any
			field string
		}{
			{"name missing", map[string]any{"storage_type": "s3"}, "name"},
			{"storage_type missing", map[string]any{"name": "x"}, "storage_type"},
			{"name taken", map[string]any{"name": "b2", "storage_type": "s3"}, "name"},
			{"name pattern", map[string]any{"name": "../etc", "storage_type": "s3"}, "name"},
			{"port range", map[string]any{"name": "x", "storage_type": "s3", "port": 70000}, "port"},
			{"port wrong type", map[string]any{"name": "x", "storage_type": "s3", "port": "80"}, "port"},
			{"scheme", map[string]any{"name": "x", "storage_type": "s3", "scheme": "ftp"}, "scheme"},
			{"advanced_settings wrong type", map[string]any{"name": "x", "storage_type": "s3", "advanced_settings": "a"}, "advanced_settings"},
			{"credentials_json wrong type", map[string]any{"name": "x", "storage_type": "s3", "credentials_json": 5}, "credentials_json"},
			{"secret wrong type", map[string]any{"name": "x", "storage_type": "s3", "secret_access_key": 5}, "secret_access_key"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/buckets/", tc.body), tc.field)
			})
		}

		// A bucket being deleted cannot change.
		_, err := models.SetBucketSoftDeleting(context.Background(), e.DB, id, true)
		require.NoError(t, err)
		r = e.AsAdmin(http.MethodPatch, pathOf("buckets", id), map[string]any{"label": "x"})
		requireStatus(t, http.StatusConflict, r)
		require.Equal(t, true, e.AsAdmin(http.MethodGet, pathOf("buckets", id), nil).Map()["soft_deleting"])
		_, err = models.SetBucketSoftDeleting(context.Background(), e.DB, id, false)
		require.NoError(t, err)

		checkPermissions(t, e, "plain", "buckets", id, map[string]any{"name": "p", "storage_type": "s3"})
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("buckets", 9999), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, pathOf("buckets", 9999), map[string]any{}))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("buckets", 9999), nil))
	})
}

func TestExternalTargets(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		east := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "east"}))
		west := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "west"}))
		b1 := recordID(t, e.AsAdmin(http.MethodPost, "/api/buckets/", secretBody(map[string]any{"name": "b1", "storage_type": "s3"})))
		b2 := recordID(t, e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": "b2", "storage_type": "s3"}))

		r := e.AsAdmin(http.MethodPost, "/api/external_targets/", secretBody(map[string]any{
			"name": "t1", "storage_type": "s3", "local_file_regex": `.*\.tif$`, "backup_only": true, "backup_site": west,
			"available_on_sites": []int64{east, west}, "delete_on_recall": true, "bucket": b1,
			"endpoint": "s3.local", "port": 443, "migration_target_folder": "prefix", "id": 3,
		}))
		requireStatus(t, http.StatusCreated, r)
		requireNoTestSecrets(t, r)
		id := recordID(t, r)
		tg := r.Map()
		require.Equal(t, true, tg["enabled"], "default")
		require.Equal(t, true, tg["backup_only"])
		require.Equal(t, float64(west), tg["backup_site"])
		require.Equal(t, []any{float64(east), float64(west)}, tg["available_on_sites"])
		bucket := tg["bucket"].(map[string]any)
		require.Equal(t, "b1", bucket["name"])
		require.Equal(t, float64(b1), bucket["id"])
		require.Equal(t, []any{float64(id)}, bucket["external_targets"])
		requireSealed(t, e, "external_targets", id)

		// bucket by name; and a bucket's external_targets list.
		r = e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "t2", "storage_type": "s3",
			"local_file_regex": ".*", "bucket": "b2", "enabled": false})
		requireStatus(t, http.StatusCreated, r)
		t2 := recordID(t, r)
		require.Equal(t, "b2", r.Map()["bucket"].(map[string]any)["name"])
		require.Equal(t, false, r.Map()["enabled"])
		requireStatus(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{
			"name": "t3", "storage_type": "filesystem", "local_file_regex": ".*"}))
		require.Equal(t, []any{float64(t2)}, e.AsAdmin(http.MethodGet, pathOf("buckets", b2), nil).Map()["external_targets"])

		names := func(path string) []string {
			r := e.AsAdmin(http.MethodGet, path, nil)
			requireStatus(t, http.StatusOK, r)
			requireNoTestSecrets(t, r)
			out := []string{}
			for _, x := range r.Map()["results"].([]any) {
				out = append(out, x.(map[string]any)["name"].(string))
			}
			return out
		}
		require.Equal(t, []string{"t1", "t2", "t3"}, names("/api/external_targets/"))
		require.Equal(t, []string{"t1"}, names("/api/external_targets/?bucket=b1"))
		require.Equal(t, []string{"t2"}, names(fmt.Sprintf("/api/external_targets/?bucket=%d", b2)))
		require.Equal(t, []string{}, names("/api/external_targets/?bucket=nope"))

		r = e.AsAdmin(http.MethodGet, pathOf("external_targets", id), nil)
		requireStatus(t, http.StatusOK, r)
		requireNoTestSecrets(t, r)

		r = e.AsAdmin(http.MethodPatch, pathOf("external_targets", id), map[string]any{"bucket": nil, "backup_site": nil,
			"available_on_sites": []int64{east}, "local_file_regex": "^a"})
		requireStatus(t, http.StatusOK, r)
		require.Nil(t, r.Map()["bucket"])
		require.Nil(t, r.Map()["backup_site"])
		require.Equal(t, []any{float64(east)}, r.Map()["available_on_sites"])
		require.Equal(t, "^a", r.Map()["local_file_regex"])
		requireSealed(t, e, "external_targets", id)
		r = e.AsAdmin(http.MethodPatch, pathOf("external_targets", id), map[string]any{"secret_access_key": ""})
		requireStatus(t, http.StatusOK, r)
		var sak string
		require.NoError(t, e.DB.NewSelect().Table("external_targets").Column("secret_access_key_enc").Where("id = ?", id).Scan(context.Background(), &sak))
		require.Empty(t, sak, "an empty secret clears it")

		base := map[string]any{"name": "n", "storage_type": "s3", "local_file_regex": ".*"}
		with := func(k string, v any) map[string]any {
			b := map[string]any{}
			for kk, vv := range base {
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
			{"name taken", with("name", "t2"), "name"},
			{"storage_type missing", with("storage_type", nil), "storage_type"},
			{"regex missing", with("local_file_regex", nil), "local_file_regex"},
			{"regex invalid", with("local_file_regex", "a(b"), "local_file_regex"},
			{"regex wrong type", with("local_file_regex", 5), "local_file_regex"},
			{"enabled wrong type", with("enabled", "yes"), "enabled"},
			{"backup_site unknown", with("backup_site", 9999), "backup_site"},
			{"available_on_sites unknown", with("available_on_sites", []int{9999}), "available_on_sites"},
			{"available_on_sites wrong type", with("available_on_sites", "east"), "available_on_sites"},
			{"bucket unknown id", with("bucket", 9999), "bucket"},
			{"bucket unknown name", with("bucket", "nope"), "bucket"},
			{"bucket wrong type", with("bucket", []int{1}), "bucket"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				requireFieldError(t, e.AsAdmin(http.MethodPost, "/api/external_targets/", tc.body), tc.field)
			})
		}

		checkPermissions(t, e, "plain", "external_targets", id, base)
		requireStatus(t, http.StatusNoContent, e.AsAdmin(http.MethodDelete, pathOf("external_targets", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("external_targets", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodPatch, pathOf("external_targets", id), map[string]any{}))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("external_targets", id), nil))
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, pathOf("external_targets", id)+"files/", nil))
	})
}

// TestBucketDelete: DELETE answers 202 with soft_deleting and a task id;
// the workflow removes the bucket's settings at each site where it is
// available, then the record.
func TestBucketDelete(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		roots := map[string]string{"east": t.TempDir(), "west": t.TempDir(), "north": t.TempDir()}
		ids := map[string]int64{}
		for name, root := range roots {
			e.StartSiteWorker(worker.SiteConfig{Site: name, Queue: "default", Node: "n1", Root: root, HeartbeatInterval: time.Second})
			ids[name] = recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": name}))
			dir := filepath.Join(root, ".hub", "config", "targets")
			require.NoError(t, os.MkdirAll(dir, 0o750))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "cold.json"), []byte(`{"bucket":"cold"}`), 0o600))
		}
		bid := recordID(t, e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": "cold", "storage_type": "s3"}))
		tid := recordID(t, e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "t", "storage_type": "s3",
			"local_file_regex": ".*", "bucket": bid, "available_on_sites": []int64{ids["east"]}, "backup_site": ids["west"]}))

		r := e.AsAdmin(http.MethodDelete, pathOf("buckets", bid), nil)
		requireStatus(t, http.StatusAccepted, r)
		require.Equal(t, fmt.Sprintf("bucket-delete-%d", bid), r.Map()["task_id"])
		require.Equal(t, true, r.Map()["soft_deleting"])
		require.Equal(t, "cold", r.Map()["name"])

		require.Eventually(t, func() bool {
			return e.AsAdmin(http.MethodGet, pathOf("buckets", bid), nil).Status == http.StatusNotFound
		}, 30*time.Second, 100*time.Millisecond)
		for name, root := range roots {
			_, err := os.Stat(filepath.Join(root, ".hub", "config", "targets", "cold.json"))
			if name == "north" {
				require.NoError(t, err, "the bucket is not available at north: its file stays")
			} else {
				require.True(t, os.IsNotExist(err), "settings removed at %s", name)
			}
		}
		r = e.AsAdmin(http.MethodGet, pathOf("external_targets", tid), nil)
		requireStatus(t, http.StatusOK, r)
		require.Nil(t, r.Map()["bucket"], "the target stays, without its bucket")
		requireStatus(t, http.StatusNotFound, e.AsAdmin(http.MethodDelete, pathOf("buckets", bid), nil))

		plain := apitest.Bearer(e.CreateUser("plain"))
		other := recordID(t, e.AsAdmin(http.MethodPost, "/api/buckets/", map[string]any{"name": "warm", "storage_type": "s3"}))
		requireStatus(t, http.StatusForbidden, e.Do(http.MethodDelete, pathOf("buckets", other), plain, nil))
		require.Equal(t, false, e.AsAdmin(http.MethodGet, pathOf("buckets", other), nil).Map()["soft_deleting"])
	})
}

// TestExternalTargetFiles lists a filesystem target through a site worker
// and an S3 target from the hub with the credentials it keeps.
func TestExternalTargetFiles(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		e.StartSiteWorker(worker.SiteConfig{Site: "east", Queue: "default", Node: "n1", Root: t.TempDir(), HeartbeatInterval: time.Second})
		east := recordID(t, e.AsAdmin(http.MethodPost, "/api/sites/", map[string]any{"name": "east"}))

		folder := t.TempDir()
		for _, f := range []string{"a.txt", "img1.tif", "img2.tif", "dir/b.txt", "dir/sub/c.txt", "other/d.txt"} {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(folder, f)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(folder, f), []byte("content "+f), 0o644))
		}
		fsT := recordID(t, e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "fs", "storage_type": "filesystem",
			"local_file_regex": ".*", "migration_target_folder": folder, "available_on_sites": []int64{east}}))
		list := func(id int64, query string) map[string]any {
			r := e.AsAdmin(http.MethodGet, pathOf("external_targets", id)+"files/"+query, nil)
			requireStatus(t, http.StatusOK, r)
			return r.Map()
		}
		names := func(m map[string]any, key string) []string {
			out := []string{}
			for _, x := range m[key].([]any) {
				out = append(out, x.(map[string]any)["name"].(string))
			}
			return out
		}
		m := list(fsT, "")
		require.Equal(t, []string{"dir", "other"}, names(m, "directories"))
		require.Equal(t, []string{"a.txt", "img1.tif", "img2.tif"}, names(m, "files"))
		require.Nil(t, m["next_marker"])
		f0 := m["files"].([]any)[0].(map[string]any)
		require.Equal(t, "/a.txt", f0["path"])
		require.Equal(t, fmt.Sprint(len("content a.txt")), f0["size"], "size is a string")
		require.Equal(t, "file", f0["type"])
		require.Equal(t, float64(3), m["summary"].(map[string]any)["files"])

		m = list(fsT, "?path=dir")
		require.Equal(t, []string{"sub"}, names(m, "directories"))
		require.Equal(t, []string{"b.txt"}, names(m, "files"))
		require.Equal(t, "/dir/sub", m["directories"].([]any)[0].(map[string]any)["path"])

		m = list(fsT, "?path=*.tif")
		require.Equal(t, []string{"img1.tif", "img2.tif"}, names(m, "files"))
		require.Empty(t, names(m, "directories"))

		// Paging with max_items and marker visits every entry once.
		var seen []string
		marker := ""
		for range 10 {
			m = list(fsT, "?max_items=2&marker="+url.QueryEscape(marker))
			seen = append(seen, names(m, "directories")...)
			seen = append(seen, names(m, "files")...)
			if m["next_marker"] == nil {
				break
			}
			marker = m["next_marker"].(string)
		}
		require.Equal(t, []string{"a.txt", "dir", "img1.tif", "img2.tif", "other"}, sortedCopy(seen))
		require.Len(t, seen, 5)

		requireFieldError(t, e.AsAdmin(http.MethodGet, pathOf("external_targets", fsT)+"files/?path=*/c.txt", nil), "path")
		requireFieldError(t, e.AsAdmin(http.MethodGet, pathOf("external_targets", fsT)+"files/?path=../x", nil), "path")
		requireFieldError(t, e.AsAdmin(http.MethodGet, pathOf("external_targets", fsT)+"files/?max_items=0", nil), "max_items")
		requireFieldError(t, e.AsAdmin(http.MethodGet, pathOf("external_targets", fsT)+"files/?max_items=x", nil), "max_items")

		// A folder beneath a volume not mounted is refused, and not made
		// by the listing (a site's first use would then take it).
		missing := filepath.Join(t.TempDir(), "unmounted", "archive")
		gone := recordID(t, e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "gone", "storage_type": "filesystem",
			"local_file_regex": ".*", "migration_target_folder": missing, "available_on_sites": []int64{east}}))
		r := e.AsAdmin(http.MethodGet, pathOf("external_targets", gone)+"files/", nil)
		requireStatus(t, http.StatusBadGateway, r)
		require.Contains(t, string(r.Body), "mount its volume")
		require.NoDirExists(t, filepath.Dir(missing))

		// S3, listed by the hub: the sealed credentials sign the requests.
		backend := s3mem.New()
		require.NoError(t, backend.CreateBucket("s3b"))
		var mu sync.Mutex
		var auths []string
		fake := gofakes3.New(backend).Server()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auths = append(auths, r.Header.Get("Authorization"))
			mu.Unlock()
			fake.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		d, err := targets.Open(targets.Config{StorageType: "s3", Endpoint: srv.URL, Bucket: "s3b", Prefix: "pre"})
		require.NoError(t, err)
		for _, k := range []string{"x/1.bin", "y.bin"} {
			require.NoError(t, d.Put(context.Background(), k, bytes.NewReader([]byte("12345")), 5))
		}
		bid := recordID(t, e.AsAdmin(http.MethodPost, "/api/buckets/", secretBody(map[string]any{"name": "s3b", "storage_type": "s3",
			"endpoint": srv.URL})))
		s3T := recordID(t, e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "s3", "storage_type": "s3",
			"local_file_regex": ".*", "bucket": bid, "migration_target_folder": "pre"}))
		mu.Lock()
		auths = nil
		mu.Unlock()
		m = list(s3T, "")
		require.Equal(t, []string{"x"}, names(m, "directories"))
		require.Equal(t, []string{"y.bin"}, names(m, "files"))
		require.Equal(t, "5", m["files"].([]any)[0].(map[string]any)["size"])
		mu.Lock()
		require.NotEmpty(t, auths)
		require.Contains(t, auths[0], "Credential="+testKeyID+"/", "signed with the bucket's key id")
		mu.Unlock()

		// A filesystem target on no site cannot be listed.
		lone := recordID(t, e.AsAdmin(http.MethodPost, "/api/external_targets/", map[string]any{"name": "lone", "storage_type": "filesystem",
			"local_file_regex": ".*", "migration_target_folder": folder}))
		requireStatus(t, http.StatusConflict, e.AsAdmin(http.MethodGet, pathOf("external_targets", lone)+"files/", nil))

		plain := apitest.Bearer(e.CreateUser("plain"))
		requireStatus(t, http.StatusOK, e.Do(http.MethodGet, pathOf("external_targets", fsT)+"files/", plain, nil))
		require.False(t, strings.Contains(string(e.AsAdmin(http.MethodGet, pathOf("external_targets", s3T), nil).Body), testSecretKey))
	})
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
