package hub_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub"
)

// TestOpenAPICoversEveryRoute fails when a registered route is missing
// from /api/schema/, has no summary or, answering a body, no type for it:
// add its line to routeDocs in api/hub/openapi.go (docs/openapi.md).
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	h := (&hub.Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	engine, ok := h.(*gin.Engine)
	require.True(t, ok)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/schema/", nil))
	require.Equal(t, http.StatusOK, rec.Code, "served without authentication")
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))

	routes := engine.Routes()
	require.NotEmpty(t, routes)
	var undocumented, untyped []string
	for _, r := range routes {
		p := r.Path
		for _, seg := range strings.Split(r.Path, "/") {
			if strings.HasPrefix(seg, ":") || strings.HasPrefix(seg, "*") {
				p = strings.Replace(p, seg, "{"+seg[1:]+"}", 1)
			}
		}
		item, ok := doc.Paths[p]
		require.True(t, ok, "%s %s is not in the OpenAPI document", r.Method, p)
		op, ok := item[strings.ToLower(r.Method)]
		require.True(t, ok, "%s %s is not in the OpenAPI document", r.Method, p)
		if op["summary"] == nil || op["summary"] == "" {
			undocumented = append(undocumented, r.Method+" "+r.Path)
		}
		responses, _ := op["responses"].(map[string]any)
		require.NotEmpty(t, responses, "%s %s", r.Method, p)
		for status, resp := range responses {
			if strings.HasPrefix(status, "2") && status != "204" && resp.(map[string]any)["content"] == nil {
				untyped = append(untyped, r.Method+" "+r.Path+" "+status)
			}
		}
	}
	require.Empty(t, undocumented, "routes without a summary: add a line for each to routeDocs in api/hub/openapi.go")
	require.Empty(t, untyped, "answers without a type: give the route's routeDocs line a value of the type it answers")
	count := 0
	for _, item := range doc.Paths {
		count += len(item)
	}
	require.Equal(t, len(routes), count, "the document lists only served routes")

	// Path parameters are declared, and known schemas are referenced.
	get := doc.Paths["/api/workflows/{id}/"]["get"]
	require.Equal(t, "id", get["parameters"].([]any)[0].(map[string]any)["name"])
	require.Contains(t, rec.Body.String(), `"#/components/schemas/Workflow"`)
	require.Equal(t, []any{}, doc.Paths["/api/schema/"]["get"]["security"], "public routes say so")

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/schema/?format=yaml", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "openapi: 3.0.3")
}

// TestOpenAPIDocumentIsValid checks the document with an outside
// validator, and that its schemas say what clients need: required fields,
// enums, nullable fields, formats and a shared error body.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	h := (&hub.Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/schema/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	job := doc.Components.Schemas["Job"].Value
	require.Contains(t, job.Required, "state")
	require.Contains(t, job.Required, "completed", "a field always present is required, even when null")
	require.Equal(t, []any{"PENDING", "STARTED", "PAUSING", "PAUSED", "CANCELLING", "CANCELLED", "SUCCESS", "FAILURE"},
		job.Properties["state"].Value.Enum)
	require.True(t, job.Properties["completed"].Value.Nullable)
	require.Equal(t, "date-time", job.Properties["created"].Value.Format)
	require.Equal(t, "int64", job.Properties["id"].Value.Format)
	require.Contains(t, doc.Components.Schemas["Task"].Value.Properties["state"].Value.Enum, "SKIPPED")
	require.NotContains(t, doc.Components.Schemas["SiteCertificate"].Value.Required, "private_key", "omitempty: sometimes absent")

	// A nullable reference is wrapped, since $ref cannot carry nullable.
	bucket := doc.Components.Schemas["ExternalTarget"].Value.Properties["bucket"].Value
	require.True(t, bucket.Nullable)
	require.Equal(t, "#/components/schemas/Bucket", bucket.AllOf[0].Ref)

	op := doc.Paths.Value("/api/jobs/{id}/").Get
	require.Equal(t, []string{"jobs"}, op.Tags)
	require.Equal(t, "#/components/schemas/Job", op.Responses.Status(http.StatusOK).Value.Content.Get("application/json").Schema.Ref)
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound} {
		require.Equal(t, "#/components/schemas/Error", op.Responses.Status(status).Value.Content.Get("application/json").Schema.Ref)
	}
	page := doc.Paths.Value("/api/jobs/").Get.Responses.Status(http.StatusOK).Value.Content.Get("application/json").Schema.Value
	require.ElementsMatch(t, []string{"count", "next", "previous", "results", "owners"}, page.Required)
	require.Equal(t, "#/components/schemas/Job", page.Properties["results"].Value.Items.Ref)

	body := doc.Paths.Value("/api/file/workflow/").Post.RequestBody.Value
	require.True(t, body.Required)
	require.Equal(t, "#/components/schemas/RunWorkflowInput", body.Content.Get("application/json").Schema.Ref)
	require.Empty(t, doc.Components.Schemas["RunWorkflowInput"].Value.Required, "a body's fields are checked by the handler")
}

func TestSwaggerUI(t *testing.T) {
	t.Parallel()
	h := (&hub.Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	rec := get("/api/docs/")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Header().Get("Content-Type"), "text/html")
	require.Contains(t, rec.Body.String(), "swagger-ui")
	rec = get("/api/docs/swagger-initializer.js")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `url: "../schema/"`, "the UI reads the hub's own document")
	rec = get("/api/docs/swagger-ui-bundle.js")
	require.Equal(t, http.StatusOK, rec.Code, "assets come from the binary")
	require.Greater(t, rec.Body.Len(), 100000)
	require.Contains(t, rec.Header().Get("Content-Type"), "javascript")
	rec = get("/api/docs/swagger-ui.css")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, http.StatusNotFound, get("/api/docs/nothing.js").Code)
	require.Equal(t, http.StatusNotFound, get("/api/docs/..%2fopenapi.go").Code)
}
