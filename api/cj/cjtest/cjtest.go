// Package cjtest runs the C+J API and its token server for tests against
// real parts: a fresh database of each supported kind, a fresh namespace of
// the process-wide embedded Temporal server (apitest.NewNamespace), the hub
// worker, and a site worker over a temporary site root.
package cjtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/cj"
	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

// AdminPassword is the password of the "admin" superuser of every Env.
const AdminPassword = "admin-password-1"

// Site is the site every Env manages.
const Site = "site1"

// Env is one C+J API and token server over one database, one Temporal
// namespace and one site root.
type Env struct {
	T        testing.TB
	DB       *bun.DB
	Temporal client.Client
	Tokens   *auth.Tokens
	// Root is the site root; ConfigDir the site's configuration folder.
	Root, ConfigDir string
	// URL is the C+J API's base URL, AuthURL the token server's.
	URL, AuthURL string
	// Admin is a C+J token of the superuser "admin".
	Admin string
	// API is the C+J server under test.
	API *cj.Server
}

// Each runs body once per database kind with a fresh Env.
func Each(t *testing.T, body func(t *testing.T, e *Env)) {
	for _, kind := range dbtest.Dialects(t) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			body(t, New(t, kind))
		})
	}
}

// New starts an Env over a fresh database of the given kind, with the hub
// worker and the site's worker running.
func New(t testing.TB, kind string) *Env {
	ctx := context.Background()
	db := dbtest.Open(t, kind)
	require.NoError(t, models.EnsureAuthData(ctx, db))
	_, err := models.EnsureAdmin(ctx, db, "admin", AdminPassword, false)
	require.NoError(t, err)
	_, err = models.EnsureSite(ctx, db, Site)
	require.NoError(t, err)
	tokens, err := auth.NewTokens(ctx, db)
	require.NoError(t, err)
	e := &Env{T: t, DB: db, Tokens: tokens}
	e.Temporal, _ = apitest.NewNamespace(t)

	e.Root = filepath.Join(t.TempDir(), "root")
	// Snapshots are read-only; make the tree removable for TempDir's cleanup.
	t.Cleanup(func() { MakeWritable(e.Root) })
	e.ConfigDir = filepath.Join(e.Root, ".hub", "config")

	hw := worker.Hub(e.Temporal, &hubact.Activities{DB: db})
	require.NoError(t, hw.Start())
	t.Cleanup(hw.Stop)
	sw, err := worker.Site(e.Temporal, worker.SiteConfig{Site: Site, Queue: vocab.DefaultQueue, Root: e.Root,
		Node: "test-node", ConfigDir: e.ConfigDir})
	require.NoError(t, err)
	require.NoError(t, sw.Start())
	t.Cleanup(sw.Stop)

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.API = &cj.Server{DB: db, Tokens: tokens, Changes: &changes.Service{DB: db, Temporal: e.Temporal, Log: log}, Site: Site, Log: log}
	srv := httptest.NewServer(e.API.Handler())
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	oauth := &auth.OAuth2Server{DB: db, Tokens: tokens, Log: log}
	asrv := httptest.NewServer(oauth.Handler())
	t.Cleanup(asrv.Close)
	e.AuthURL = asrv.URL
	e.Admin = e.Token("admin", AdminPassword)
	return e
}

// MakeWritable gives the owner write access to every folder below dir, so
// that read-only snapshots can be removed.
func MakeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

// Token obtains a C+J token from the token server.
func (e *Env) Token(username, password string) string {
	e.T.Helper()
	resp, err := http.PostForm(e.AuthURL+"/oauth2/token", url.Values{
		"grant_type": {"password"}, "username": {username}, "password": {password}})
	require.NoError(e.T, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(e.T, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(e.T, http.StatusOK, resp.StatusCode, out)
	return out["access_token"].(string)
}

// CreateUser creates an active user in the given groups (none: no roles)
// and returns a C+J token for it.
func (e *Env) CreateUser(username string, groups ...string) string {
	e.T.Helper()
	u := &models.User{Username: username, IsActive: true}
	require.NoError(e.T, u.SetPassword("password-"+username))
	require.NoError(e.T, models.CreateUser(context.Background(), e.DB, u, groups, 0))
	return e.Token(username, "password-"+username)
}

// Response is a decoded answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Doc decodes the body as a C+J document.
func (r Response) Doc() cjdoc.Document {
	var d cjdoc.Document
	_ = json.Unmarshal(r.Body, &d)
	return d
}

// Map decodes the body as a JSON object.
func (r Response) Map() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Items returns the data of each item as a name → value map.
func (r Response) Items() []map[string]any {
	var out []map[string]any
	for _, it := range r.Doc().Collection.Items {
		out = append(out, Data(it.Data))
	}
	return out
}

// Item returns the data of the only item.
func (r Response) Item() map[string]any {
	items := r.Items()
	if len(items) != 1 {
		return nil
	}
	return items[0]
}

// Error returns the C+J error object, nil when there is none.
func (r Response) Error() *cjdoc.Error { return r.Doc().Collection.Error }

// Allow returns the methods of the Allow header.
func (r Response) Allow() []string {
	var out []string
	for m := range strings.SplitSeq(r.Header.Get("Allow"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// Data turns C+J data elements into a name → value map.
func Data(data []cjdoc.Data) map[string]any {
	m := make(map[string]any, len(data))
	for _, d := range data {
		m[d.Name] = d.Value
	}
	return m
}

// Write builds a C+J write body from name → value pairs, in name order.
func Write(values map[string]any) string {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	data := make([]map[string]any, 0, len(names))
	for _, n := range names {
		data = append(data, map[string]any{"name": n, "value": values[n]})
	}
	b, _ := json.Marshal(map[string]any{"template": map[string]any{"data": data}})
	return string(b)
}

// Do sends a request to the C+J API with token as the basic-auth user name
// (none when empty), a body (a string as is, anything else as a write
// template of its map) and header name/value pairs.
func (e *Env) Do(method, path, token string, body any, header ...string) Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case map[string]any:
		rd = strings.NewReader(Write(b))
	default:
		data, err := json.Marshal(b)
		require.NoError(e.T, err)
		rd = bytes.NewReader(data)
	}
	u := path
	if !strings.HasPrefix(path, "http") {
		u = e.URL + path
	}
	req, err := http.NewRequest(method, u, rd)
	require.NoError(e.T, err)
	if body != nil {
		req.Header.Set("Content-Type", cjdoc.MediaType)
	}
	if token != "" {
		req.SetBasicAuth(token, "")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.T, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.T, err)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// Create posts an item as admin, requires 202 and returns its path and data.
func (e *Env) Create(collection string, values map[string]any) (string, map[string]any) {
	e.T.Helper()
	r := e.Do(http.MethodPost, "/"+collection+"/", e.Admin, values)
	require.Equal(e.T, http.StatusAccepted, r.Status, string(r.Body))
	loc, err := url.Parse(r.Header.Get("Location"))
	require.NoError(e.T, err)
	return loc.Path, r.Item()
}

// WaitStatus polls an item as admin until its status is want and returns
// its data. It fails at once if the item settles in the other final state
// (ACTIVE or ERRORED), printing its job log, and after a minute otherwise.
func (e *Env) WaitStatus(path, want string) map[string]any {
	e.T.Helper()
	return e.WaitStatusEvery(path, want, 50*time.Millisecond)
}

// WaitStatusEvery is WaitStatus polling every poll: benchmarks that time a
// change poll far more often than 50 ms, which would round every figure up
// to the next tick.
func (e *Env) WaitStatusEvery(path, want string, poll time.Duration) map[string]any {
	e.T.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var last map[string]any
	for {
		r := e.Do(http.MethodGet, path, e.Admin, nil)
		if r.Status == http.StatusOK {
			last = r.Item()
			switch st := last["status"]; {
			case st == want:
				return last
			case st == models.CJActive || st == models.CJErrored:
				log := e.Do(http.MethodGet, path+"/log", e.Admin, nil)
				require.FailNowf(e.T, "unexpected status", "%s is %s, want %s; log: %s", path, st, want, log.Body)
			}
		}
		if time.Now().After(deadline) {
			require.FailNowf(e.T, "timeout", "%s never became %s; last: %v", path, want, last)
		}
		<-tick.C
	}
}

// WaitGone polls an item as admin until it is removed: 404 without the
// document a deletion under way still shows.
func (e *Env) WaitGone(path string) {
	e.T.Helper()
	require.Eventually(e.T, func() bool {
		r := e.Do(http.MethodGet, path, e.Admin, nil)
		return r.Status == http.StatusNotFound && len(r.Doc().Collection.Items) == 0
	}, time.Minute, 50*time.Millisecond, "%s was never removed", path)
}
