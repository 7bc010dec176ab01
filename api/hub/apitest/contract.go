package apitest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"
)

// The contract check holds every answer the hub gives a test to what its
// OpenAPI document (GET /api/schema/) says of the route and the status:
// the fields, their types, which are required, the enums. CheckResponses
// turns it on for a test binary; every Env's server then checks each
// response as it goes, and the run fails at the end when any did not
// match. The document is checked closed: an object may not hold a field
// the document does not name, so a field served but undocumented fails
// too.
var contract struct {
	mu       sync.Mutex
	on       bool
	doc      *openapi3.T
	router   routers.Router
	called   map[string]bool // "GET /api/jobs/{id}/"
	answered map[string]bool // called and answered with a success
	failures map[string]bool // one line per route, status, field and reason
}

// CheckResponses runs the tests of m with the contract check on. It
// prints every mismatch and fails the run when there is any; when the
// whole suite ran (no -run), it also lists the documented endpoints that
// no test called, and those no test saw succeed (whose success body is
// then unchecked). Call it from TestMain:
// os.Exit(apitest.CheckResponses(m)).
func CheckResponses(m *testing.M) int {
	contract.on = true
	code := m.Run()
	contract.mu.Lock()
	defer contract.mu.Unlock()
	if contract.doc == nil {
		return code // no test started an Env
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		printUncalled()
	}
	if len(contract.failures) > 0 {
		lines := make([]string, 0, len(contract.failures))
		for l := range contract.failures {
			lines = append(lines, l)
		}
		slices.Sort(lines)
		fmt.Fprintf(os.Stderr, "FAIL: %d mismatches between responses and the OpenAPI document (api/hub/openapi.go, docs/openapi.md):\n\t%s\n",
			len(lines), strings.Join(lines, "\n\t"))
		if code == 0 {
			code = 1
		}
	}
	return code
}

func printUncalled() {
	var never, failed []string
	total := 0
	for path, item := range contract.doc.Paths.Map() {
		for method := range item.Operations() {
			total++
			switch key := method + " " + path; {
			case !contract.called[key]:
				never = append(never, key)
			case !contract.answered[key]:
				failed = append(failed, key)
			}
		}
	}
	slices.Sort(never)
	slices.Sort(failed)
	fmt.Printf("OpenAPI: of %d documented endpoints, the tests called %d.\n", total, len(contract.called))
	fmt.Printf("Never called (%d):\n\t%s\n", len(never), strings.Join(never, "\n\t"))
	fmt.Printf("Called, never answered with a success, so their success body is unchecked (%d):\n\t%s\n",
		len(failed), strings.Join(failed, "\n\t"))
}

// checked wraps the API's handler with the contract check when it is on
// (never in a benchmark: it would time the validator, not the hub).
func checked(t testing.TB, h http.Handler) http.Handler {
	if _, bench := t.(*testing.B); bench || !contract.on {
		return h
	}
	contract.mu.Lock()
	defer contract.mu.Unlock()
	if contract.doc == nil {
		doc, err := loadDocument(h)
		require.NoError(t, err, "the OpenAPI document")
		contract.doc = doc
		contract.router, err = gorillamux.NewRouter(doc)
		require.NoError(t, err, "route the OpenAPI document")
		contract.called, contract.answered, contract.failures = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tee := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(tee, r)
		checkResponse(r, tee.status, w.Header(), tee.body.Bytes())
	})
}

// loadDocument reads the document h serves, validates it and closes its
// objects (see closeObjects).
func loadDocument(h http.Handler) (*openapi3.T, error) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/schema/", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("GET /api/schema/: %d", rec.Code)
	}
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	seen := map[*openapi3.Schema]bool{}
	for _, s := range doc.Components.Schemas {
		closeObjects(s, seen)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					closeObjects(mt.Schema, seen)
				}
			}
		}
	}
	return doc, nil
}

// closeObjects forbids, in the tests only, fields the document does not
// name: every object schema that lists its properties and says nothing of
// others gets additionalProperties: false. Clients stay free to accept
// new fields.
func closeObjects(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	ap := s.AdditionalProperties
	if len(s.Properties) > 0 && ap.Has == nil && ap.Schema == nil {
		s.AdditionalProperties = openapi3.AdditionalProperties{Has: openapi3.Ptr(false)}
	}
	for _, p := range s.Properties {
		closeObjects(p, seen)
	}
	closeObjects(s.Items, seen)
	closeObjects(ap.Schema, seen)
	for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range list {
			closeObjects(sub, seen)
		}
	}
}

// teeWriter keeps a copy of the status and the body it passes on.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func checkResponse(r *http.Request, status int, header http.Header, body []byte) {
	contract.mu.Lock()
	defer contract.mu.Unlock()
	route, params, err := contract.router.FindRoute(r)
	if err != nil {
		return // no such route (a test of 404 or 405 for unknown routes)
	}
	key := r.Method + " " + route.Path
	contract.called[key] = true
	if status < http.StatusBadRequest {
		contract.answered[key] = true
	}
	mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
			// Only JSON bodies are checked; the UI's assets and the YAML
			// document are not.
			ExcludeResponseBody:     mediaType != "application/json",
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()}},
	}
	in.SetBodyBytes(body)
	err = openapi3filter.ValidateResponse(context.Background(), in)
	for _, m := range mismatches(err) {
		contract.failures[fmt.Sprintf("%s %d: %s", key, status, m)] = true
	}
}

var (
	arrayIndex   = regexp.MustCompile(`^\d+$`)
	fieldProblem = regexp.MustCompile(`^property "([^"]*)" is (unsupported|missing)$`)
)

// describe names the field a schema error concerns and what is wrong.
func describe(path []string, reason string) string {
	if m := fieldProblem.FindStringSubmatch(reason); m != nil {
		path = append(path, m[1])
		reason = "served but not documented"
		if m[2] == "missing" {
			reason = "documented as required but absent"
		}
	}
	return "/" + strings.Join(path, "/") + ": " + reason
}

// mismatches describes each failure in err by the field it concerns, list
// indexes replaced by *, so that one mistake in a list is one line.
func mismatches(err error) []string {
	if err == nil {
		return nil
	}
	var re *openapi3filter.ResponseError
	if errors.As(err, &re) && re.Err == nil {
		return []string{re.Reason}
	}
	var out []string
	var walk func(error)
	walk = func(err error) {
		var multi openapi3.MultiError
		var se *openapi3.SchemaError
		switch {
		case errors.As(err, &multi):
			for _, e := range multi {
				walk(e)
			}
		case errors.As(err, &se):
			path := se.JSONPointer()
			for i, p := range path {
				if arrayIndex.MatchString(p) {
					path[i] = "*"
				}
			}
			out = append(out, describe(path, se.Reason))
		default:
			out = append(out, err.Error())
		}
	}
	walk(err)
	return out
}
