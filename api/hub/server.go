// Package hub serves the hub's JSON API under /api/.
package hub

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
)

// Server holds what the hub API handlers depend on.
type Server struct {
	DB       *bun.DB
	Tokens   *auth.Tokens
	IDP      *auth.IDP
	Temporal client.Client
	Log      *slog.Logger
}

// Handler returns the API's HTTP handler with every route registered.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false // paths end with a slash; a redirect would turn POST into GET
	r.Use(web.RequestIDs(s.Log), web.Recover(s.Log), web.Errors(s.Log))
	r.NoRoute(web.NotFound)
	r.NoMethod(web.MethodNotAllowed)

	api := r.Group("/api")
	s.authRoutes(api)

	authed := api.Group("", auth.Authenticate(s.DB, s.Tokens))
	s.clientKeyRoutes(authed)
	s.userRoutes(authed)
	s.groupRoutes(authed)
	s.healthRoutes(authed)
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
