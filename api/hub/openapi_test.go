package hub_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub"
)

// TestOpenAPICoversEveryRoute fails when a registered route is missing
// from /api/schema/ or has no summary: add its line to routeDocs in
// api/hub/openapi.go.
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
	var undocumented []string
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
		require.NotEmpty(t, op["responses"], "%s %s", r.Method, p)
	}
	require.Empty(t, undocumented, "routes without a summary: add a line for each to routeDocs in api/hub/openapi.go")
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
