package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

// FuzzWriteEndpoints sends arbitrary bodies, query strings and path
// parameters to every write route (POST, PUT, PATCH, DELETE) of the hub
// API as the superuser, over a real database, Temporal and site worker:
// no answer is a 5xx, and every answer with a body is JSON.
//
// `go test` (and so `make test`) runs the seed corpus only: each write
// route with empty and malformed bodies, every known field set to a bad
// value of its type (anchored to real records, so creates reach the
// database), and fuzzSeedMutations deterministic random mutations of
// those — a bounded randomized pass of about a minute. The long run,
// with a time bound, is (see docs/input-limits.md):
//
//	HUB_TEST_SQLITE_ONLY=1 go test ./api/hub/ -run '^$' -fuzz '^FuzzWriteEndpoints$' -fuzztime 10m
//
// An input that fails is saved under testdata/fuzz/FuzzWriteEndpoints/
// and replayed by every later `go test`.
func FuzzWriteEndpoints(f *testing.F) {
	e, restore := fuzzHubEnv(f)
	routes := writeRoutes(e)
	gen := newRBGen()
	for i, rt := range routes {
		rng := rand.New(rand.NewPCG(uint64(i), 8))
		bodies := []string{"", "{", "null", `{"name": "a\u0000b"}`, "{\"label\": \"\xff\"}", rbAllFields(`"` + strings.Repeat("y", 5000) + `"`)}
		for class := range rbClasses {
			bodies = append(bodies, gen.body(rt.Method+" "+rt.Path, class, map[string]bool{}, true))
		}
		for k := range fuzzSeedMutations {
			bodies = append(bodies, mutateJSON(rng, bodies[rng.IntN(len(bodies))]), mutateJSON(rng, bodies[6+k%len(rbClasses)]))
		}
		for k, b := range bodies {
			query := ""
			if k%3 == 2 {
				query = "page=-1&site=s1&path=../../etc&state=%ff&custom_timeout=1e99"
			}
			f.Add(uint16(i), uint8(k), b, query)
		}
	}
	admin := apitest.Bearer(e.Admin)
	f.Fuzz(func(t *testing.T, route uint16, pathPick uint8, body, query string) {
		rt := routes[int(route)%len(routes)]
		paths, _ := rbPaths(rt.Path)
		target := paths[int(pathPick)%len(paths)]
		if query != "" {
			target += "?" + escapeQuery(query)
		}
		status, answer := fuzzSend(t, e.URL, rt.Method, target, admin, body)
		switch {
		case status >= 500:
			t.Fatalf("%s %s with %.300q: %d %.500s", rt.Method, target, body, status, answer)
		case len(answer) > 0 && !json.Valid(answer):
			t.Fatalf("%s %s with %.300q: %d and a body that is not JSON: %.500s", rt.Method, target, body, status, answer)
		}
		if status < 300 {
			restore(t)
		}
	})
}

// fuzzSeedMutations is how many random mutations each route gets in the
// seed corpus, twice over: it bounds the randomized pass of `go test`.
const fuzzSeedMutations = 3

// fuzzHubEnv is the hub API of the fuzz run: sqlite, the hub worker, one
// site s1 with a worker, one record of each kind (rbSeed), and short
// waits for the endpoints that run a workflow. restore puts back the
// admin and the site after a request that changed them, so that later
// inputs still get past authentication to the handlers' validation.
func fuzzHubEnv(f *testing.F) (*apitest.Env, func(testing.TB)) {
	ctx := context.Background()
	e := apitest.New(f, "sqlite")
	site, err := models.EnsureSite(ctx, e.DB, "s1")
	require.NoError(f, err)
	e.StartHubWorker()
	e.StartSiteWorker(worker.SiteConfig{Site: "s1", Queue: "default", Node: "n", Root: f.TempDir(), HeartbeatInterval: time.Second})
	e.API.WorkflowWait = time.Second
	rbSeed(f, e)
	return e, rbRestore(f, e, site.ID)
}

// writeRoutes are the API's routes that may change something.
func writeRoutes(e *apitest.Env) []gin.RouteInfo {
	var out []gin.RouteInfo
	for _, rt := range e.API.Handler().(*gin.Engine).Routes() {
		switch rt.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			out = append(out, rt)
		}
	}
	return out
}

// fuzzSend sends one request; only a transport failure fails the test here.
func fuzzSend(t *testing.T, base, method, target, authorization, body string) (int, []byte) {
	req, err := http.NewRequest(method, base+target, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authorization)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, answer
}

// escapeQuery makes arbitrary text a query string a client can send: it
// percent-encodes every byte but unreserved characters, & and =.
func escapeQuery(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-._~&=%", c) >= 0:
			b.WriteByte(c) // % is kept: the fuzzer's own escapes, valid or not, reach the server
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// fuzzTokens are the bits mutateJSON splices into bodies: text no
// database stores, numbers no column holds, and JSON that breaks shape.
var fuzzTokens = []string{`\u0000`, "\xff", `\ud800`, `\"`, `"`, `{`, `}`, `[`, `]`, `,`, `:`, `1e999`, `-0`,
	`9223372036854775808`, `-9223372036854775809`, `null`, `true`, `""`, `{}`, `[]`, `"../../etc"`, `"*"`,
	`"` + strings.Repeat("z", 70000) + `"`, `"` + strings.Repeat("é", 300) + `"`}

// mutateJSON returns s with one to three random edits: a token spliced
// in, a span deleted or a span repeated.
func mutateJSON(rng *rand.Rand, s string) string {
	for range 1 + rng.IntN(3) {
		at := 0
		if len(s) > 0 {
			at = rng.IntN(len(s) + 1)
		}
		switch rng.IntN(3) {
		case 0:
			s = s[:at] + fuzzTokens[rng.IntN(len(fuzzTokens))] + s[at:]
		case 1:
			end := min(len(s), at+rng.IntN(40))
			s = s[:at] + s[end:]
		default:
			end := min(len(s), at+rng.IntN(40))
			s = s[:end] + s[at:end] + s[end:]
		}
	}
	return s
}
