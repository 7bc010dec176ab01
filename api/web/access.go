package web

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// RequestObserver is told of every answered request (the process's
// metrics implement it).
type RequestObserver interface {
	ObserveRequest(server, method, route string, status int, d time.Duration)
}

// access is what the router learns about a request for its access log
// line: the route pattern it matched and the authenticated user.
type access struct {
	route, user string
}

type accessKey struct{}

func accessOf(ctx context.Context) *access {
	a, _ := ctx.Value(accessKey{}).(*access)
	return a
}

// Route records the route pattern a request matched (gin's FullPath, never
// the raw URL) for AccessLog. Install it on every router, after
// RequestIDs.
func Route(c *gin.Context) {
	if a := accessOf(c.Request.Context()); a != nil {
		a.route = c.FullPath()
	}
}

// SetUser names the authenticated user of the request in its access log
// line.
func SetUser(c *gin.Context, username string) {
	if a := accessOf(c.Request.Context()); a != nil {
		a.user = username
	}
}

// AccessLog wraps one HTTP server's handler: each request, once answered,
// is one info line (request id, method, route, status, duration, user,
// client address) and one observation for obs (which may be nil). server
// names the server in both ("api", "cj", "auth").
func AccessLog(log *slog.Logger, server string, obs RequestObserver, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		a := new(access)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accessKey{}, a)))
		d := time.Since(start)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		route := a.route
		if route == "" {
			route = "unmatched"
		}
		if obs != nil {
			obs.ObserveRequest(server, r.Method, route, status, d)
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("server", server),
			slog.String("request_id", w.Header().Get("X-Request-ID")),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(d.Microseconds())/1000),
			slog.String("user", a.user),
			slog.String("remote", r.RemoteAddr))
	})
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on (streamed answers).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes hijacking on.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("the connection cannot be hijacked")
}
