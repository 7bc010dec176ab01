package cj_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/cj"
	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// fuzzServer is an in-memory C+J API over sqlite with one item of each
// writable type; it returns the handler, an admin token and the items'
// paths.
func fuzzServer(f *testing.F) (http.Handler, string, []string) {
	ctx := context.Background()
	db := dbtest.Open(f, "sqlite")
	require.NoError(f, models.EnsureAuthData(ctx, db))
	_, err := models.EnsureAdmin(ctx, db, "admin", cjtest.AdminPassword, false)
	require.NoError(f, err)
	tokens, err := auth.NewTokens(ctx, db)
	require.NoError(f, err)
	admin, err := models.GetUser(ctx, db, "admin")
	require.NoError(f, err)
	tok, err := tokens.IssueCJ(admin, nil)
	require.NoError(f, err)
	// No Temporal answers: every change is committed and left to the
	// reconciler, so fuzzing exercises the API alone.
	away, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Namespace: "nowhere"})
	require.NoError(f, err)
	f.Cleanup(away.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := &cj.Server{DB: db, Tokens: tokens, Changes: &changes.Service{DB: db, Temporal: away, Log: log}, Site: cjtest.Site, Log: log}
	h := srv.Handler()
	var paths []string
	for _, c := range []struct {
		coll string
		data map[string]any
	}{
		{"templates", map[string]any{"name": "t", "directories": []any{"a/b"}}},
		{"ilmsteps", map[string]any{"name": "s", "kind": "placement", "pool": "p"}},
		{"profiles", map[string]any{"name": "p", "ilmsteps": []any{"s"}}},
		{"spaces", map[string]any{"name": "sp", "profile": "p", "templates": []any{1}}},
		{"exposers", map[string]any{"name": "e", "type": "nfs", "space": "sp"}},
		{"snapshots", map[string]any{"name": "sn", "space": "sp"}},
	} {
		rec := serve(h, tok, http.MethodPost, "/"+c.coll+"/", cjtest.Write(c.data), nil)
		require.Equal(f, http.StatusAccepted, rec.Code, rec.Body.String())
		loc, err := url.Parse(rec.Header().Get("Location"))
		require.NoError(f, err)
		paths = append(paths, loc.Path)
	}
	return h, tok, paths
}

func serve(h http.Handler, tok, method, target, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://cj.test/", strings.NewReader(body))
	req.URL.Path, req.URL.RawQuery, _ = strings.Cut(target, "?")
	req.RequestURI = req.URL.RequestURI()
	req.SetBasicAuth(tok, "")
	req.Header.Set("Content-Type", cjdoc.MediaType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// FuzzServerBody sends arbitrary bodies to every write endpoint: POST to
// every collection, PATCH, DELETE and PUT to every item (PUT is 405): the
// answer is never a server error. `go test` runs the seeds, each with every
// method and target (deletes last, so that the other writes find their
// items); the long run is in docs/input-limits.md.
func FuzzServerBody(f *testing.F) {
	h, tok, paths := fuzzServer(f)
	seeds := []string{
		cjtest.Write(map[string]any{"name": "x1"}),
		cjtest.Write(map[string]any{"name": "x2", "type": "cifs", "space": "sp", "valid_users": []any{"a"}}),
		cjtest.Write(map[string]any{"name": "x3", "space": "sp", "exposers": []any{map[string]any{"name": "x4", "type": "nfs"}}}),
		cjtest.Write(map[string]any{"quota": 12, "comment": nil, "extras": map[string]any{"a": []any{1.5}}}),
		cjtest.Write(map[string]any{"name": "x5", "comment": "a\x00b", "extras": map[string]any{"k\x00": "v"}}),
		cjtest.Write(map[string]any{"name": "x6", "type": "nfs", "space": "sp", "clients": []any{"../../etc", "a b", "@", "10.0.0.0/99"}}),
		cjtest.Write(map[string]any{"name": strings.Repeat("n", 200), "comment": strings.Repeat("c", 5000), "path": strings.Repeat("/p", 600)}),
		`{"collection":{"template":{"data":[{"name":"name","value":"x5"},{"name":"kind","value":"migration"},{"name":"pool","value":"q"}]}}}`,
		`{"template":{"data":[{"name":"templates","value":[1e300,-0,"1"]}]}}`,
		`{"template":{"data":[{"name":"directories","value":["../x","/","a//b/./c"]}]}}`,
		`{"template":{"data":[{"name":"profile","value":{"name":{"x":1}}}]}}`,
		`{"template":{"data":[{"name":"exposers","value":[null,{},[],{"name":"y","type":"nfs","z":1}]}]}}`,
		`{"template":{"data":[{"name":"comment","value":"\ud800"},{"name":"name","value":"x7"}]}}`,
		"{\"template\":{\"data\":[{\"name\":\"comment\",\"value\":\"\xff\"}]}}",
		`{"template":{"data":[1,{"name":""}]}}`, `[]`, `null`, `{"template":`, "\xff",
	}
	methods := []string{http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete}
	for m := range methods {
		for _, seed := range seeds {
			for i := range max(len(resourceNames), len(paths)) {
				f.Add(uint8(m*64+i), seed)
			}
		}
	}
	f.Fuzz(func(t *testing.T, pick uint8, body string) {
		method, target := methods[pick/64], paths[int(pick%64)%len(paths)]
		if method == http.MethodPost {
			target = "/" + resourceNames[int(pick%64)%len(resourceNames)] + "/"
		}
		rec := serve(h, tok, method, target, body, map[string]string{"If-Match": "*"})
		if rec.Code >= 500 {
			t.Fatalf("%s %s with %q: %d %s", method, target, body, rec.Code, rec.Body)
		}
	})
}

var resourceNames = []string{"templates", "ilmsteps", "profiles", "spaces", "exposers", "snapshots", "datastores"}

// FuzzServerQuery sends arbitrary query strings to every collection: the
// answer is a page or a 400, never a server error.
func FuzzServerQuery(f *testing.F) {
	h, tok, _ := fuzzServer(f)
	for _, seed := range []string{
		"", "max_results=2&page=3", "where=%7B%22name%22%3A%22sp%22%7D", `sort=[("name",-1),("profile.name",1)]`,
		`projection={"name":0,"exposers.type":0}`, `where={"$or":[{"exposers.name":{"$regex":"^e"}},{"_created":{"$gt":"2020-01-01T00:00:00Z"}}]}`,
		`where={"templates":{"$all":[1],"$size":1}}`, "page=99999999999999999999", "where=%ZZ", "sort=-",
	} {
		for i := range len(resourceNames) {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, pick uint8, query string) {
		target := fmt.Sprintf("/%s/?%s", resourceNames[int(pick)%len(resourceNames)], query)
		if strings.ContainsAny(query, "# \x00") {
			return // not a query string a client can send
		}
		rec := serve(h, tok, http.MethodGet, target, "", nil)
		if rec.Code >= 500 {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
	})
}
