package cj_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/models"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		for _, tc := range []struct {
			name string
			set  []string
		}{
			{"no credentials", nil},
			{"forged token", []string{"Authorization", "Basic " + basic(e.Admin+"x", "")}},
			{"user name and password", []string{"Authorization", "Basic " + basic("admin", cjtest.AdminPassword)}},
			{"token with a password", []string{"Authorization", "Basic " + basic(e.Admin, "x")}},
		} {
			r := e.Do(http.MethodGet, "/spaces/", "", nil, tc.set...)
			require.Equal(t, http.StatusUnauthorized, r.Status, tc.name)
			require.Contains(t, r.Header.Get("WWW-Authenticate"), "Basic", tc.name)
			require.Equal(t, cjdoc.MediaType, r.Header.Get("Content-Type"), tc.name)
			require.Equal(t, "unauthorized", r.Error().Code, tc.name)
		}
		// A Bearer header works as well as the basic-auth user name.
		r := e.Do(http.MethodGet, "/spaces/", "", nil, "Authorization", "Bearer "+e.Admin)
		require.Equal(t, http.StatusOK, r.Status)

		// A deactivated user's token stops working at once.
		tok := e.CreateUser("leaver", models.GroupAdministrators)
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/", tok, nil).Status)
		u, err := models.GetUser(t.Context(), e.DB, "leaver")
		require.NoError(t, err)
		u.IsActive = false
		require.NoError(t, models.UpdateUser(t.Context(), e.DB, u, nil, 0))
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/", tok, nil).Status)
	})
}

func basic(user, pass string) string {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

func TestBillboard(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		r := e.Do(http.MethodGet, "/", e.Admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		c := r.Doc().Collection
		require.Equal(t, "1.0", c.Version)
		require.Equal(t, e.URL+"/", c.Href)
		var names []string
		for _, l := range c.Links {
			require.Equal(t, "resource", l.Rel)
			require.Equal(t, e.URL+"/"+l.Name+"/", l.Href)
			names = append(names, l.Name)
		}
		require.Equal(t, []string{"datastores", "ilmsteps", "profiles", "spaces", "templates", "exposers", "snapshots"}, names)
	})
}

func TestStatusCodes(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		a := e.Admin
		path, item := e.Create("templates", map[string]any{"name": "t1", "directories": []any{"a"}})
		etag := item["_etag"].(string)
		good := map[string]any{"name": "ok"}
		cases := []struct {
			name, method, path string
			body               any
			header             []string
			status             int
			code               string
		}{
			{"list", http.MethodGet, "/templates/", nil, nil, http.StatusOK, ""},
			{"head", http.MethodHead, "/templates/", nil, nil, http.StatusOK, ""},
			{"item", http.MethodGet, path, nil, nil, http.StatusOK, ""},
			{"unknown item", http.MethodGet, "/templates/999999", nil, nil, http.StatusNotFound, "not-found"},
			{"non-numeric id", http.MethodGet, "/templates/abc", nil, nil, http.StatusNotFound, "not-found"},
			{"unknown type", http.MethodGet, "/widgets/", nil, nil, http.StatusNotFound, "not-found"},
			{"POST without slash", http.MethodPost, "/templates", good, nil, http.StatusNotFound, "not-found"},
			{"GET without slash", http.MethodGet, "/templates", nil, nil, http.StatusNotFound, "not-found"},
			{"PUT item", http.MethodPut, path, good, []string{"If-Match", etag}, http.StatusMethodNotAllowed, "method-not-allowed"},
			{"PUT collection", http.MethodPut, "/templates/", good, nil, http.StatusMethodNotAllowed, "method-not-allowed"},
			{"DELETE collection", http.MethodDelete, "/templates/", nil, nil, http.StatusMethodNotAllowed, "method-not-allowed"},
			{"PATCH collection", http.MethodPatch, "/templates/", good, nil, http.StatusMethodNotAllowed, "method-not-allowed"},
			{"POST item", http.MethodPost, path, good, nil, http.StatusMethodNotAllowed, "method-not-allowed"},
			{"PATCH without If-Match", http.MethodPatch, path, good, nil, http.StatusPreconditionRequired, "precondition-required"},
			{"DELETE without If-Match", http.MethodDelete, path, nil, nil, http.StatusPreconditionRequired, "precondition-required"},
			{"PATCH stale", http.MethodPatch, path, good, []string{"If-Match", `"0000"`}, http.StatusPreconditionFailed, "precondition-failed"},
			{"DELETE stale", http.MethodDelete, path, nil, []string{"If-Match", "0000"}, http.StatusPreconditionFailed, "precondition-failed"},
			{"malformed body", http.MethodPost, "/templates/", `{"template":`, nil, http.StatusBadRequest, "malformed-body"},
			{"wrong shape", http.MethodPost, "/templates/", `{"data":[]}`, nil, http.StatusBadRequest, "malformed-body"},
			{"empty body", http.MethodPost, "/templates/", "", nil, http.StatusBadRequest, "malformed-body"},
			{"form body", http.MethodPost, "/templates/", "name=x", []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "unsupported-media-type"},
			{"huge body", http.MethodPost, "/templates/", `{"template":{"data":[{"name":"name","value":"` + strings.Repeat("a", 2<<20) + `"}]}}`, nil, http.StatusRequestEntityTooLarge, "payload-too-large"},
			{"required missing", http.MethodPost, "/templates/", map[string]any{"directories": []any{}}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"regex", http.MethodPost, "/spaces/", map[string]any{"name": "no spaces"}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"wrong type", http.MethodPost, "/spaces/", map[string]any{"name": "s", "quota": "big"}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"unknown field", http.MethodPost, "/spaces/", map[string]any{"name": "s", "colour": "red"}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"dangling reference", http.MethodPost, "/spaces/", map[string]any{"name": "s", "profile": "nope", "templates": []any{424242}}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"climbing folder", http.MethodPost, "/templates/", map[string]any{"name": "t2", "directories": []any{"../etc"}}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"name taken", http.MethodPost, "/templates/", map[string]any{"name": "t1"}, nil, http.StatusUnprocessableEntity, "invalid-data"},
			{"bad where", http.MethodGet, "/templates/?where=%7Bname", nil, nil, http.StatusBadRequest, "invalid-query"},
			{"bad sort", http.MethodGet, "/templates/?sort=%5B(", nil, nil, http.StatusBadRequest, "invalid-query"},
			{"bad max_results", http.MethodGet, "/templates/?max_results=-1", nil, nil, http.StatusBadRequest, "invalid-query"},
			{"bad page", http.MethodGet, "/templates/?page=x", nil, nil, http.StatusBadRequest, "invalid-query"},
			{"bad projection", http.MethodGet, "/templates/?projection=%7B%22a%22%3A2%7D", nil, nil, http.StatusBadRequest, "invalid-query"},
			{"log", http.MethodGet, path + "/log", nil, nil, http.StatusOK, ""},
		}
		for _, tc := range cases {
			r := e.Do(tc.method, tc.path, a, tc.body, tc.header...)
			require.Equal(t, tc.status, r.Status, "%s: %s", tc.name, r.Body)
			if tc.method == http.MethodHead {
				continue
			}
			require.Equal(t, cjdoc.MediaType, r.Header.Get("Content-Type"), tc.name)
			if tc.code == "" {
				require.Nil(t, r.Error(), tc.name)
				continue
			}
			require.NotNil(t, r.Error(), "%s: %s", tc.name, r.Body)
			require.Equal(t, tc.code, r.Error().Code, tc.name)
			require.NotEmpty(t, r.Error().Message, tc.name)
		}

		// Validation errors name every offending field.
		r := e.Do(http.MethodPost, "/spaces/", a, map[string]any{"name": "bad name!", "quota": 1.5, "templates": "x"})
		require.Equal(t, http.StatusUnprocessableEntity, r.Status)
		var fields []string
		for _, f := range r.Error().Fields {
			fields = append(fields, f.Name)
		}
		require.ElementsMatch(t, []string{"name", "quota", "templates"}, fields)

		// Immutable fields cannot change; the update template leaves them out.
		space, data := e.Create("spaces", map[string]any{"name": "fixed"})
		r = e.Do(http.MethodPatch, space, a, map[string]any{"name": "other", "templates": []any{"nope"}}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		require.Len(t, r.Error().Fields, 2)
		require.Equal(t, "cannot be changed", r.Error().Fields[0].Message)
		// Sending them unchanged is no change.
		r = e.Do(http.MethodPatch, space, a, map[string]any{"name": "fixed", "templates": []any{}, "comment": "same name"}, "If-Match", data["_etag"].(string))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, "same name", r.Item()["comment"])
		r = e.Do(http.MethodGet, space, a, nil)
		var updatable []string
		for _, d := range r.Doc().Collection.Template.Data {
			updatable = append(updatable, d.Name)
		}
		require.Equal(t, []string{"quota", "profile", "comment", "extras"}, updatable)
		require.Equal(t, `"`+r.Item()["_etag"].(string)+`"`, r.Header.Get("ETag"))

		// The create answer: 202, Location, status NEW; the collection's
		// template marks required fields and patterns.
		r = e.Do(http.MethodPost, "/templates/", a, map[string]any{"name": "t3"})
		require.Equal(t, http.StatusAccepted, r.Status)
		require.Equal(t, fmt.Sprintf("%s/templates/%v", e.URL, r.Item()["id"]), r.Header.Get("Location"))
		require.Equal(t, models.CJNew, r.Item()["status"])
		for _, k := range []string{"id", "_etag", "_created", "_modified", "status", "comment", "extras"} {
			require.Contains(t, r.Item(), k)
		}
		r = e.Do(http.MethodGet, "/spaces/", a, nil)
		tmpl := r.Doc().Collection.Template
		require.NotNil(t, tmpl)
		require.Equal(t, "name", tmpl.Data[0].Name)
		require.True(t, *tmpl.Data[0].Required)
		require.Equal(t, `^[\w\-]+\Z`, tmpl.Data[0].Regex)
		r = e.Do(http.MethodGet, "/exposers/", a, nil)
		require.Nil(t, r.Doc().Collection.Template)
		var kinds []string
		for _, tp := range r.Doc().Collection.Templates {
			kinds = append(kinds, tp.Name)
		}
		require.Equal(t, []string{"cifs", "gpfsnative", "nfs"}, kinds)

		// An ilmstep used by a profile cannot be deleted: 409.
		step, sd := e.Create("ilmsteps", map[string]any{"name": "s1", "kind": "placement", "pool": "p"})
		e.Create("profiles", map[string]any{"name": "p1", "ilmsteps": []any{"s1"}})
		r = e.Do(http.MethodDelete, step, a, nil, "If-Match", sd["_etag"].(string))
		require.Equal(t, http.StatusConflict, r.Status, string(r.Body))

		// A template may be renamed, but not to a name in use.
		r = e.Do(http.MethodPatch, path, a, map[string]any{"name": "t3"}, "If-Match", etag)
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		require.Equal(t, "name", r.Error().Fields[0].Name)
		r = e.Do(http.MethodPatch, path, a, map[string]any{"name": "t1-renamed"}, "If-Match", etag)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.Equal(t, "t1-renamed", r.Item()["name"])
		require.NotEqual(t, etag, r.Item()["_etag"])
		etag = r.Item()["_etag"].(string)

		// DELETE: 204 with an empty body; If-Match may be quoted, weak or *.
		r = e.Do(http.MethodDelete, path, a, nil, "If-Match", `W/"nope", "`+etag+`"`)
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		require.Empty(t, r.Body)
		r = e.Do(http.MethodDelete, path, a, nil, "If-Match", "*")
		require.Equal(t, http.StatusNotFound, r.Status, "deleted once")
	})
}

func TestQueries(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		for i := 1; i <= 30; i++ {
			e.Create("templates", map[string]any{"name": fmt.Sprintf("t%02d", i),
				"directories": []any{fmt.Sprintf("d%d", i%3)}, "comment": []string{"even", "odd"}[i%2]})
		}
		get := func(query string) cjtest.Response {
			t.Helper()
			r := e.Do(http.MethodGet, "/templates/?"+query, e.Admin, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r.Body)
			return r
		}
		names := func(r cjtest.Response) []string {
			var out []string
			for _, it := range r.Items() {
				out = append(out, it["name"].(string))
			}
			return out
		}
		props := func(r cjtest.Response) map[string]any { return cjtest.Data(r.Doc().Collection.Properties) }
		links := func(r cjtest.Response) map[string]string {
			m := map[string]string{}
			for _, l := range r.Doc().Collection.Links {
				m[l.Rel] = l.Href
			}
			return m
		}

		// Default: 25 a page, in creation order, with paging links.
		r := get("")
		require.Len(t, r.Items(), 25)
		require.Equal(t, "30", r.Header.Get("X-Total-Count"))
		require.Equal(t, map[string]any{"total": float64(30), "page": float64(1), "max_results": float64(25)}, props(r))
		l := links(r)
		require.Equal(t, e.URL+"/templates/", l["self"])
		require.Equal(t, e.URL+"/templates/?page=2", l["next"])
		require.Equal(t, e.URL+"/templates/?page=2", l["last"])
		require.NotContains(t, l, "previous")

		// page and max_results, with the other parameters kept in links.
		r = get("max_results=7&page=2&sort=-name")
		require.Equal(t, []string{"t23", "t22", "t21", "t20", "t19", "t18", "t17"}, names(r))
		l = links(r)
		require.Equal(t, e.URL+"/templates/?max_results=7&page=3&sort=-name", l["next"])
		require.Equal(t, e.URL+"/templates/?max_results=7&page=1&sort=-name", l["previous"])
		require.Equal(t, e.URL+"/templates/?max_results=7&page=5&sort=-name", l["last"])
		require.Empty(t, get("page=9").Items(), "a page past the end is empty")
		require.Len(t, get("max_results=1000").Items(), 30, "max_results is capped at 100")

		// where: equality, dotted and array fields, operators.
		r = get("where=" + url.QueryEscape(`{"name": "t07"}`))
		require.Equal(t, []string{"t07"}, names(r))
		require.Equal(t, "1", r.Header.Get("X-Total-Count"))
		r = get("where=" + url.QueryEscape(`{"directories": "d0", "comment": "odd"}`) + "&sort=name")
		require.Equal(t, []string{"t03", "t09", "t15", "t21", "t27"}, names(r))
		r = get("where=" + url.QueryEscape(`{"name": {"$in": ["t01", "t30"]}, "status": {"$exists": true}}`) + "&sort=" + url.QueryEscape(`[("name", -1)]`))
		require.Equal(t, []string{"t30", "t01"}, names(r))

		// projection keeps id and _etag.
		r = get("projection=" + url.QueryEscape(`{"name": 1}`) + "&max_results=1")
		require.Equal(t, []string{"name", "id", "_etag"}, func() []string {
			var out []string
			for _, d := range r.Doc().Collection.Items[0].Data {
				out = append(out, d.Name)
			}
			return out
		}())

		// The collection offers search templates.
		r = get("")
		q := r.Doc().Collection.Queries
		require.NotEmpty(t, q)
		require.Equal(t, "search", q[0].Rel)
		require.Equal(t, "uri-template", q[0].Encoding)
		require.Equal(t, e.URL+"/templates/?where=%7B%22name%22%3A%22{name}%22%7D", q[0].Href)

		// Spaces are searchable by their exposers.
		e.Create("spaces", map[string]any{"name": "alpha", "exposers": []any{map[string]any{"name": "alpha-smb", "type": "cifs"}}})
		e.Create("spaces", map[string]any{"name": "beta"})
		r = e.Do(http.MethodGet, "/spaces/?where="+url.QueryEscape(`{"exposers.type": "cifs"}`), e.Admin, nil)
		require.Equal(t, []string{"alpha"}, names(r))

		// Malformed queries are 400, never 500; an empty parameter is absent.
		for _, bad := range []url.Values{
			{"where": {"[]"}}, {"where": {`{"$where": "1"}`}}, {"where": {`{"a": {"$regex": "("}}`}},
			{"sort": {"a,a"}}, {"max_results": {"0"}}, {"page": {"0"}}, {"page": {"1", "2"}},
			{"projection": {`{"a": 1, "b": 0}`}},
		} {
			r := e.Do(http.MethodGet, "/templates/?"+bad.Encode(), e.Admin, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", bad, r.Body)
			require.Equal(t, "invalid-query", r.Error().Code)
		}
		require.Len(t, get("sort=&where=").Items(), 25)
	})
}

func TestConcurrentPatch(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		path, data := e.Create("templates", map[string]any{"name": "contended"})
		etag := data["_etag"].(string)
		const n = 10
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := e.Do(http.MethodPatch, path, e.Admin, map[string]any{"comment": fmt.Sprintf("writer %d", i)}, "If-Match", etag)
				statuses[i] = r.Status
			})
		}
		wg.Wait()
		won := 0
		for _, s := range statuses {
			switch s {
			case http.StatusAccepted:
				won++
			case http.StatusPreconditionFailed:
			default:
				t.Fatalf("unexpected status %d", s)
			}
		}
		require.Equal(t, 1, won, "exactly one writer wins: %v", statuses)
		final := e.WaitStatus(path, models.CJActive)
		require.NotEqual(t, etag, final["_etag"])
		require.Regexp(t, `^writer \d$`, final["comment"])
	})
}

func TestRoles(t *testing.T) {
	t.Parallel()
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		writer := e.CreateUser("writer", models.GroupAdministrators)
		reader := e.CreateUser("reader", models.GroupUsers)
		nobody := e.CreateUser("nobody")
		path, data := e.Create("templates", map[string]any{"name": "t"})
		etag := data["_etag"].(string)

		allow := func(tok, p string) []string {
			r := e.Do(http.MethodOptions, p, tok, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			return r.Allow()
		}
		require.Equal(t, []string{"GET", "HEAD", "POST", "OPTIONS"}, allow(writer, "/templates/"))
		require.Equal(t, []string{"GET", "HEAD", "PATCH", "DELETE", "OPTIONS"}, allow(writer, path))
		require.Equal(t, []string{"GET", "HEAD", "OPTIONS"}, allow(reader, "/templates/"))
		require.Equal(t, []string{"GET", "HEAD", "OPTIONS"}, allow(reader, path))
		require.Equal(t, []string{"GET", "HEAD", "OPTIONS"}, allow(writer, "/datastores/"))
		require.Equal(t, []string{"GET", "HEAD", "OPTIONS"}, allow(writer, "/"))
		require.Equal(t, []string{"OPTIONS"}, allow(nobody, "/templates/"))

		// Readers read, without templates; their writes are 403, or 405
		// where the method is never allowed.
		r := e.Do(http.MethodGet, "/templates/", reader, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Nil(t, r.Doc().Collection.Template)
		r = e.Do(http.MethodGet, path, reader, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Nil(t, r.Doc().Collection.Template)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/templates/", reader, map[string]any{"name": "x"}).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPatch, path, reader, map[string]any{"comment": "x"}, "If-Match", etag).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodDelete, path, reader, nil, "If-Match", etag).Status)
		r = e.Do(http.MethodPut, path, reader, map[string]any{"name": "x"})
		require.Equal(t, http.StatusMethodNotAllowed, r.Status)
		require.Equal(t, []string{"GET", "HEAD", "OPTIONS"}, r.Allow())
		require.Equal(t, http.StatusMethodNotAllowed, e.Do(http.MethodDelete, "/templates/", reader, nil).Status)
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/templates/", nobody, nil).Status)

		// Writers write.
		r = e.Do(http.MethodPatch, path, writer, map[string]any{"comment": "x"}, "If-Match", etag)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		require.NotNil(t, r.Doc().Collection.Template)
	})
}
