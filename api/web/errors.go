// Package web holds the conventions every hub endpoint shares: error
// rendering, request ids, JSON binding, validation and pagination.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// Error is an error with an HTTP status and a message safe to show clients.
type Error struct {
	Status int
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Errorf builds an Error with a formatted detail.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Detail: fmt.Sprintf(format, args...)}
}

// Common client errors.
var (
	ErrUnauthenticated = &Error{http.StatusUnauthorized, "Authentication credentials were not provided or are invalid."}
	ErrForbidden       = &Error{http.StatusForbidden, "You do not have permission to perform this action."}
	ErrNotFound        = &Error{http.StatusNotFound, "Not found."}
)

// ValidationError maps field names to messages; it renders as 400 with the
// fields as the body, e.g. {"username": ["This field is required."]}. It
// is models.FieldErrors, which code below the API reports bad input with.
type ValidationError = models.FieldErrors

// Invalid is a one-field validation error.
func Invalid(field, msg string) error { return models.Invalid(field, msg) }

// workflowFailure turns the error of a short workflow a request waited
// for (a directory listing, a refresh) into a client error that never
// carries Temporal's wording (workflow and run ids, event ids, error
// types): a path the site refused is 404 with the site's message, a path
// a target listing refuses is 400 on "path"; no answer in time is 504;
// any other failure is 502 with the message of the activity that failed,
// which is the site's or the target's own.
func workflowFailure(e *changes.WorkflowError) error {
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(e.Err, &appErr) && appErr.Type() == vocab.ErrBadPath:
		return &Error{Status: http.StatusNotFound, Detail: appErr.Message()}
	case errors.As(e.Err, &appErr) && appErr.Type() == vocab.ErrBadListPath:
		return Invalid("path", appErr.Message())
	case errors.As(e.Err, new(*temporal.TimeoutError)), errors.Is(e.Err, context.DeadlineExceeded):
		return Errorf(http.StatusGatewayTimeout, "%s did not answer in time.", e.What)
	case errors.As(e.Err, &appErr):
		return Errorf(http.StatusBadGateway, "%s failed: %s", e.What, appErr.Message())
	}
	return Errorf(http.StatusBadGateway, "%s failed.", e.What)
}

// CleanErrorText strips Temporal's wording from an error text a workflow
// recorded (see vocab.CleanErrorText, which the hub applies as it records
// them; rows recorded before are cleaned here as they are shown).
func CleanErrorText(s string) string { return vocab.CleanErrorText(s) }

// status maps an error to its HTTP status and client-visible body: the one
// place where domain errors meet HTTP.
func status(err error) (int, any) {
	var we *Error
	var ve ValidationError
	var wf *changes.WorkflowError
	var unavailable *serviceerror.Unavailable
	var refused *models.Refused
	if errors.As(err, &wf) {
		err = workflowFailure(wf)
	}
	switch {
	case errors.As(err, &ve):
		return http.StatusBadRequest, map[string][]string(ve)
	case errors.As(err, &we):
		return we.Status, gin.H{"detail": we.Detail}
	case errors.Is(err, models.ErrNotFound):
		return http.StatusNotFound, gin.H{"detail": ErrNotFound.Detail}
	case errors.As(err, &refused):
		return http.StatusConflict, gin.H{"detail": refused.Detail}
	case errors.Is(err, models.ErrConflict):
		return http.StatusConflict, gin.H{"detail": "A record with these values already exists."}
	case errors.Is(err, changes.ErrJobNotRunning):
		return http.StatusConflict, gin.H{"detail": "The job is not running."}
	case errors.Is(err, changes.ErrJobRunning):
		return http.StatusConflict, gin.H{"detail": "The job is still running; cancel it before deleting it."}
	case errors.As(err, &unavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, gin.H{"detail": "The job engine did not answer; try again shortly."}
	}
	return http.StatusInternalServerError, nil
}

// Detail is the message a client may see for err, as the error renderer
// would show it (an embedded error of a partial answer, say).
func Detail(err error) string {
	code, body := status(err)
	if h, ok := body.(gin.H); ok && code != http.StatusInternalServerError {
		if d, ok := h["detail"].(string); ok {
			return d
		}
	}
	if ve, ok := body.(map[string][]string); ok {
		for _, msgs := range ve {
			if len(msgs) > 0 {
				return msgs[0]
			}
		}
	}
	return "Internal server error."
}

// Errors renders the last error a handler recorded with c.Error. Internal
// errors are logged with the request id and never echoed.
func Errors(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if len(c.Errors) == 0 || c.Writer.Written() {
			return
		}
		err := c.Errors.Last().Err
		code, body := status(err)
		if code == http.StatusInternalServerError {
			id := RequestID(c)
			log.Error("request failed", "request_id", id, "method", c.Request.Method, "path", c.Request.URL.Path, "error", err)
			body = gin.H{"detail": "Internal server error.", "request_id": id}
		}
		if code == http.StatusUnauthorized {
			c.Header("WWW-Authenticate", `Bearer realm="api"`)
		}
		c.JSON(code, body)
	}
}

// Recover turns a panic into a logged 500 with the usual body.
func Recover(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, v any) {
		id := RequestID(c)
		log.Error("panic in handler", "request_id", id, "path", c.Request.URL.Path, "panic", v)
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"detail": "Internal server error.", "request_id": id})
	})
}

// NotFound and MethodNotAllowed answer unknown routes in JSON.
func NotFound(c *gin.Context) { c.JSON(http.StatusNotFound, gin.H{"detail": ErrNotFound.Detail}) }

// MethodNotAllowed answers a known path with a method it does not serve.
func MethodNotAllowed(c *gin.Context) {
	c.JSON(http.StatusMethodNotAllowed, gin.H{"detail": fmt.Sprintf("Method %q not allowed.", c.Request.Method)})
}
