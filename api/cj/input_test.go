package cj_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/api/web"
)

// TestTextNoDatabaseStores: a NUL character, invalid UTF-8 or a string
// over its field's limit is the client's error (400 or 422) on every
// resource, on create and on update, never a 500 and never stored
// replaced or cut.
func TestTextNoDatabaseStores(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		_, _ = e.Create("ilmsteps", map[string]any{"name": "st", "kind": "placement", "pool": "p"})
		_, _ = e.Create("profiles", map[string]any{"name": "pr"})
		_, _ = e.Create("spaces", map[string]any{"name": "sp"})
		valid := map[string]map[string]any{
			"templates": {"name": "t"},
			"ilmsteps":  {"name": "s2", "kind": "placement", "pool": "p"},
			"profiles":  {"name": "p2"},
			"spaces":    {"name": "sp2"},
			"exposers":  {"name": "e", "type": "nfs", "space": "sp"},
			"snapshots": {"name": "sn", "space": "sp"},
		}
		long := strings.Repeat("x", web.MaxTextLen+1)
		for coll, base := range valid {
			for _, bad := range []struct {
				field string
				value any
			}{
				{"comment", "a\x00b"},
				{"comment", long},
				{"extras", map[string]any{"a": "b\x00"}},
				{"extras", map[string]any{"a\x00": 1}},
				{"extras", map[string]any{"k": strings.Repeat("v", web.MaxStringLen+1)}},
				{"name", strings.Repeat("n", web.MaxNameLen+1)},
			} {
				body := map[string]any{}
				for k, v := range base {
					body[k] = v
				}
				body[bad.field] = bad.value
				r := e.Do(http.MethodPost, "/"+coll+"/", e.Admin, body)
				require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s %s: %.300s", coll, bad.field, r.Body)
				require.Equal(t, "invalid-data", r.Error().Code)
				require.Equal(t, bad.field, strings.SplitN(r.Error().Fields[0].Name, ".", 2)[0], "%.300s", r.Body)
			}
			// Invalid UTF-8, and an escape of half a surrogate pair, are
			// refused as they are: nothing is stored with U+FFFD instead.
			for _, raw := range []string{"\"a\xffb\"", `"a\ud800b"`} {
				body := strings.Replace(cjtest.Write(base), `"template":{"data":[`,
					`"template":{"data":[{"name":"comment","value":`+raw+`},`, 1)
				r := e.Do(http.MethodPost, "/"+coll+"/", e.Admin, body)
				require.Equal(t, http.StatusBadRequest, r.Status, "%s %q: %.300s", coll, raw, r.Body)
				require.Equal(t, "malformed-body", r.Error().Code)
			}
		}
		// Updates are checked alike.
		path, _ := e.Create("templates", map[string]any{"name": "t9"})
		r := e.Do(http.MethodPatch, path, e.Admin, map[string]any{"comment": "a\x00"}, "If-Match", "*")
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		r = e.Do(http.MethodPatch, path, e.Admin, `{"template":{"data":[{"name":"comment","value":"`+"\xfe"+`"}]}}`, "If-Match", "*")
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		// Within the limits, any Unicode text is kept as sent.
		r = e.Do(http.MethodPatch, path, e.Admin, map[string]any{"comment": "été 😀 " + strings.Repeat("é", 100)}, "If-Match", "*")
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, "été 😀 "+strings.Repeat("é", 100), r.Item()["comment"])
	})
}

// TestURLTextRefused: a query or a path holding invalid UTF-8 or NUL is
// refused (400), not looked up with U+FFFD.
func TestURLTextRefused(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		for _, target := range []string{
			"/spaces/?where=%7B%22name%22%3A%22%FF%22%7D",
			"/spaces/?where=%7B%22name%22%3A%22a%00%22%7D",
			"/spaces/?max_results=%FF",
			"/spaces/%FF",
			"/sp%FFaces/",
		} {
			r := e.Do(http.MethodGet, target, e.Admin, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", target, r.Body)
			require.NotNil(t, r.Error(), target)
		}
		r := e.Do(http.MethodGet, "/spaces/?where=%7B%22name%22%3A%22%C3%A9t%C3%A9%22%7D", e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	})
}

// TestNFSClients: exposer clients are what exports(5) allows — host names,
// addresses, networks, netgroups, wildcards — and nothing else reaches
// the exports file.
func TestNFSClients(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		_, _ = e.Create("spaces", map[string]any{"name": "sp"})
		good := []any{"*", "host1", "host-2.example.org", "*.example.org", "node?.lab", "node[0-9].lab", "192.168.1.7",
			"10.0.0.0/8", "10.1.0.0/255.255.0.0", "2001:db8::1", "2001:db8::/32", "@trusted_hosts", "a"}
		_, item := e.Create("exposers", map[string]any{"name": "ok", "type": "nfs", "space": "sp", "clients": good})
		require.Equal(t, good, item["clients"])
		for i, bad := range []string{"../../etc", "..", "/etc", "a..b", ".host", "host.", "a/b", "10.0.0.0/33",
			"10.0.0.0/255.0.255.0", "300.1.1.1/8", "@", "@a b", "host name", "-host", "a]b", "[a", "host(rw)",
			"a,b", "", strings.Repeat("a", 64) + ".org", strings.Repeat("a.", 127) + "org", "a\x00", "é.org"} {
			r := e.Do(http.MethodPost, "/exposers/", e.Admin, map[string]any{"name": "bad" + string(rune('a'+i)),
				"type": "nfs", "space": "sp", "clients": []any{"host1", bad}})
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%q: %s", bad, r.Body)
			require.True(t, strings.HasPrefix(r.Error().Fields[0].Name, "clients"), "%q: %s", bad, r.Body)
		}
	})
}
