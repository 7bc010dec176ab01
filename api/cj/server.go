// Package cj serves the storage-management REST interface in
// Collection+JSON: one site's datastores, ilmsteps, profiles, spaces,
// templates, exposers and snapshots. Writes store the item and start its
// ResourceChangeWorkflow, which does the work at the site; clients poll the
// item's status. Callers authenticate with a token of the C+J token server
// (api/auth/oauth2.go) and their roles decide the methods allowed.
package cj

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// Server holds what the C+J handlers depend on.
type Server struct {
	DB     *bun.DB
	Tokens *auth.Tokens
	// Changes changes items and tells their workflows.
	Changes *changes.Service
	// Site is the site whose storage the API manages; empty means the
	// oldest site record, looked up on each request.
	Site string
	Log  *slog.Logger
	// DatastoreWait bounds how long reading datastores waits for fresh
	// figures from the site before serving the stored ones; default 5 s.
	DatastoreWait time.Duration

	mu        sync.Mutex
	refreshed map[string]time.Time // site -> last datastores refresh

	// checked, when tests set it, runs when a create or delete has passed
	// its checks and before its transaction (op is "create" or "delete";
	// it the item, not yet stored on create): what a concurrent request
	// does there, the transaction's own checks must catch.
	checked func(op string, it *models.CJItem)
}

// maxBody bounds write bodies; a C+J template is small.
const maxBody = 1 << 20

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// Collection paths end with a slash; a redirect would turn a POST into
	// a GET, so a missing slash is an error instead.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.Use(web.RequestIDs(s.Log), web.Route, gin.CustomRecoveryWithWriter(nil, s.onPanic), s.errorsMiddleware, rejectBadURL)
	r.NoRoute(func(c *gin.Context) { _ = c.Error(errNotFound) })

	r.Any("/", s.endpoint(billboardEndpoint, nil))
	for _, res := range resources {
		base := "/" + res.name
		r.Any(base+"/", s.endpoint(collectionEndpoint, res))
		r.Any(base+"/:id", s.endpoint(itemEndpoint, res))
		r.Any(base+"/:id/log", s.endpoint(logEndpoint, res))
		r.Any(base, func(c *gin.Context) {
			_ = c.Error(newError(http.StatusNotFound, codeNotFound, "Not found",
				"Collection paths end with a slash: use %s/.", base))
		})
	}
	return r
}

// rejectBadURL refuses a path or query holding NUL or invalid UTF-8 (400),
// as the hub API does (web.CheckURLText): such text would be looked up
// replaced with U+FFFD, or not at all.
func rejectBadURL(c *gin.Context) {
	bad := web.CheckURLText(c.Request.URL)
	if bad == nil {
		return
	}
	if bad.Param == "" {
		_ = c.Error(newError(http.StatusBadRequest, codeInvalidPath, "Invalid path", "%s", bad.Message))
	} else {
		_ = c.Error(&cjdoc.QueryError{Param: bad.Param, Reason: bad.Message})
	}
	c.Abort()
}

// endpointKind is the kind of path a request is for.
type endpointKind int

const (
	billboardEndpoint endpointKind = iota
	collectionEndpoint
	itemEndpoint
	logEndpoint
)

// methodOrder is the order of methods in Allow.
var methodOrder = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// supported returns the methods an endpoint serves to somebody: PUT never
// (delete and create instead), a collection never DELETE (one item at a
// time), datastores never a write.
func supported(kind endpointKind, res *resource) []string {
	m := []string{http.MethodGet, http.MethodHead}
	switch {
	case kind == collectionEndpoint && !res.readOnly:
		m = append(m, http.MethodPost)
	case kind == itemEndpoint && !res.readOnly:
		m = append(m, http.MethodPatch, http.MethodDelete)
	}
	return append(m, http.MethodOptions)
}

// allowedFor keeps the methods a caller's roles permit: readers read,
// storage admins also write.
func allowedFor(id *auth.CJIdentity, methods []string) []string {
	var out []string
	for _, m := range methods {
		switch {
		case m == http.MethodOptions:
		case m == http.MethodGet || m == http.MethodHead:
			if !id.Has(auth.RoleStorageReader) && !id.Has(auth.RoleStorageAdmin) {
				continue
			}
		case !id.Has(auth.RoleStorageAdmin):
			continue
		}
		out = append(out, m)
	}
	return out
}

// call is one authenticated request to an endpoint.
type call struct {
	c    *gin.Context
	id   *auth.CJIdentity
	site string
	res  *resource
	// allowed are the methods the caller may use here.
	allowed []string
}

func (k *call) may(method string) bool {
	for _, m := range k.allowed {
		if m == method {
			return true
		}
	}
	return false
}

// endpoint authenticates the caller, answers OPTIONS, refuses methods the
// endpoint never serves (405) or the caller's roles do not permit (403),
// and hands the rest to the endpoint's handler.
func (s *Server) endpoint(kind endpointKind, res *resource) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := s.serve(c, kind, res); err != nil {
			_ = c.Error(err)
		}
	}
}

func (s *Server) serve(c *gin.Context, kind endpointKind, res *resource) error {
	ctx := c.Request.Context()
	tok := auth.CJToken(c.Request, false)
	if tok == "" {
		return errUnauthorized
	}
	id, err := auth.CJAuthenticate(ctx, s.DB, s.Tokens, tok)
	if errors.Is(err, auth.ErrBadToken) {
		return errUnauthorized
	} else if err != nil {
		return err
	}
	web.SetUser(c, id.User.Username)
	site, err := s.siteName(ctx)
	if err != nil {
		return err
	}
	methods := supported(kind, res)
	k := &call{c: c, id: id, site: site, res: res, allowed: allowedFor(id, methods)}
	c.Header("Allow", strings.Join(k.allowed, ", "))
	method := c.Request.Method
	switch {
	case method == http.MethodOptions:
		c.Status(http.StatusOK)
		return nil
	case !contains(methods, method):
		return methodNotAllowed(method)
	case !k.may(method):
		return errForbidden
	}
	switch kind {
	case billboardEndpoint:
		return s.billboard(k)
	case collectionEndpoint:
		if method == http.MethodPost {
			return s.create(k)
		}
		return s.list(k)
	case itemEndpoint:
		switch method {
		case http.MethodPatch:
			return s.update(k)
		case http.MethodDelete:
			return s.remove(k)
		}
		return s.get(k)
	}
	return s.log(k)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// siteName returns the managed site.
func (s *Server) siteName(ctx context.Context) (string, error) {
	if s.Site != "" {
		return s.Site, nil
	}
	name, err := models.FirstSiteName(ctx, s.DB)
	if errors.Is(err, models.ErrNotFound) {
		return "", errNoSite
	}
	return name, err
}

// onPanic answers a panic with a logged 500 C+J error.
func (s *Server) onPanic(c *gin.Context, v any) {
	id := web.RequestID(c)
	s.Log.Error("panic in C+J handler", "request_id", id, "path", c.Request.URL.Path, "panic", v)
	c.Abort()
	writeDoc(c, http.StatusInternalServerError, cjdoc.ErrorDocument(web.AbsURL(c, c.Request.URL.RequestURI()),
		cjdoc.Error{Title: "Internal server error", Code: codeInternal, Message: "Internal server error (request " + id + ")."}))
}

// cjRender writes a C+J document with its media type.
type cjRender struct{ doc cjdoc.Document }

// Render implements render.Render.
func (r cjRender) Render(w http.ResponseWriter) error {
	r.WriteContentType(w)
	return json.NewEncoder(w).Encode(r.doc)
}

// WriteContentType implements render.Render.
func (r cjRender) WriteContentType(w http.ResponseWriter) {
	w.Header().Set("Content-Type", cjdoc.MediaType)
}
