// Package hub serves the hub's JSON API under /api/.
package hub

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/workflows/vocab"
)

// Server holds what the hub API handlers depend on.
type Server struct {
	DB     *bun.DB
	Tokens *auth.Tokens
	IDP    *auth.IDP
	// Changes changes records and tells their workflows: the API's only
	// way to Temporal.
	Changes *changes.Service
	Log     *slog.Logger
	// Secrets seals target and data store credentials at rest; writes that
	// carry a secret fail with 503 when it is nil.
	Secrets *vocab.Cipher
	// WorkflowWait bounds how long an endpoint that runs a short workflow
	// (site refresh, target listing) waits for it; default 30 s.
	WorkflowWait time.Duration

	renderedJobs     web.JSONCache[renderedRow] // the jobs the jobs list showed
	renderedTasks    web.JSONCache[renderedRow] // the tasks the tasks list showed
	renderedJobStats web.JSONCache[renderedRow] // the job stats the job stats list showed
	sitesPages       web.JSONCache[listPage]    // pages of the sites list, whole
	jobsPages        web.JSONCache[listPage]    // pages of the jobs list, whole
	tasksPages       web.JSONCache[listPage]    // pages of the tasks list, whole
	jobStatsPages    web.JSONCache[listPage]    // pages of the job stats list, whole (PostgreSQL)
	owners           web.JSONCache[int64]       // the owners of every job, by owners generation
}

// Handler returns the API's HTTP handler with every route registered.
func (s *Server) Handler() http.Handler {
	for _, pages := range []*web.JSONCache[listPage]{&s.sitesPages, &s.jobsPages, &s.tasksPages, &s.jobStatsPages} {
		pages.Max = 256 // whole pages: up to 100 rows each
	}
	s.owners.Max = 4 // one generation is read at a time
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false // paths end with a slash; a redirect would turn POST into GET
	r.Use(web.RequestIDs(s.Log), web.Route, web.Recover(s.Log), web.Errors(s.Log), web.RejectBadURL)
	r.NoRoute(web.NotFound)
	r.NoMethod(web.MethodNotAllowed)

	api := r.Group("/api")
	s.authRoutes(api)
	s.docRoutes(api, r)

	authed := api.Group("", auth.Authenticate(s.DB, s.Tokens))
	s.clientKeyRoutes(authed)
	s.userRoutes(authed)
	s.groupRoutes(authed)
	s.healthRoutes(authed)
	s.workflowDefRoutes(authed)
	s.configurationRoutes(authed)
	s.featureRoutes(authed)
	s.alertRoutes(authed)
	s.nodeRoutes(authed)
	s.settingsRoutes(authed)
	s.siteRoutes(authed)
	s.spaceRoutes(authed)
	s.shareRoutes(authed)
	s.storageRoutes(authed)
	s.datastoreRoutes(authed)
	s.bucketRoutes(authed)
	s.jobRoutes(authed)
	s.scheduleRoutes(authed)
	s.policyRoutes(authed)
	s.fileRoutes(authed)
	s.pkiRoutes(authed)
	s.jobReadRoutes(authed)
	s.searchRoutes(authed)
	return r
}

// handle adapts an error-returning handler to gin: the error middleware
// renders whatever it returns.
func handle(fn func(c *gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := fn(c); err != nil {
			_ = c.Error(err)
		}
	}
}

// saved answers a create with 201 and an update with 200, with the record.
func saved(c *gin.Context, create bool, record any) error {
	code := http.StatusOK
	if create {
		code = http.StatusCreated
	}
	c.JSON(code, record)
	return nil
}

// deleteByID is the body of DELETE /<resource>/{id}/: 204, or 404 for an
// unknown id.
func deleteByID(c *gin.Context, db bun.IDB, del func(context.Context, bun.IDB, int64) error) error {
	return deleteThrough(c, func(ctx context.Context, id int64) error { return del(ctx, db, id) })
}

// getOne answers GET of one record: the path's id, loaded with get and
// shown with render.
func getOne[T, R any](c *gin.Context, db bun.IDB, get func(context.Context, bun.IDB, int64) (*T, error),
	render func(*gin.Context, *T) R) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	x, err := get(c.Request.Context(), db, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, render(c, x))
	return nil
}

// writeAll answers a bare-array list: every item, rendered.
func writeAll[T, R any](c *gin.Context, items []T, render func(*gin.Context, *T) R) {
	out := make([]R, len(items))
	for i := range items {
		out[i] = render(c, &items[i])
	}
	c.JSON(http.StatusOK, out)
}
