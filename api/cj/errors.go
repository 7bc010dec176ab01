package cj

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/cj/cjdoc"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// Codes of this API's errors, beside cjdoc's malformed-body, invalid-data
// and invalid-query.
const (
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeNotFound         = "not-found"
	codeMethod           = "method-not-allowed"
	codeConflict         = "conflict"
	codePrecondition     = "precondition-failed"
	codeNeedsPrecond     = "precondition-required"
	codeTooLarge         = "payload-too-large"
	codeUnsupportedMedia = "unsupported-media-type"
	codeUnavailable      = "unavailable"
	codeInvalidPath      = "invalid-path"
	codeInternal         = "internal"
)

// apiError is an error with its status and the C+J error object to send.
type apiError struct {
	status int
	body   cjdoc.Error
}

func (e *apiError) Error() string { return e.body.Message }

func newError(status int, code, title, format string, args ...any) *apiError {
	return &apiError{status: status, body: cjdoc.Error{Title: title, Code: code, Message: fmt.Sprintf(format, args...)}}
}

var (
	errUnauthorized = newError(http.StatusUnauthorized, codeUnauthorized, "Unauthorized",
		"Send a token from the authentication server as the basic-auth user name with an empty password.")
	errForbidden = newError(http.StatusForbidden, codeForbidden, "Forbidden",
		"Your roles do not allow this method here; OPTIONS lists the methods you may use.")
	errNotFound     = newError(http.StatusNotFound, codeNotFound, "Not found", "No such resource.")
	errNeedsIfMatch = newError(http.StatusPreconditionRequired, codeNeedsPrecond, "Precondition required", "Send If-Match with the item's _etag.")
	errStale        = newError(http.StatusPreconditionFailed, codePrecondition, "Precondition failed", "The item changed since you read it: If-Match does not match its _etag. Read it again.")
	errBodyTooLarge = newError(http.StatusRequestEntityTooLarge, codeTooLarge, "Payload too large", "The body may hold at most %d bytes.", maxBody)
	errMediaType    = newError(http.StatusUnsupportedMediaType, codeUnsupportedMedia, "Unsupported media type", "Send the body as %s.", cjdoc.MediaType)
	errNoSite       = newError(http.StatusServiceUnavailable, codeUnavailable, "No site", "No storage site is configured: create a site or set HUB_CJ_SITE.")
)

func methodNotAllowed(method string) *apiError {
	return newError(http.StatusMethodNotAllowed, codeMethod, "Method not allowed", "%s is not allowed here; see the Allow header.", method)
}

func conflict(format string, args ...any) *apiError {
	return newError(http.StatusConflict, codeConflict, "Conflict", format, args...)
}

// statusOf maps an error to its status and C+J error object: the one place
// where this API's errors meet HTTP.
func statusOf(err error) (int, cjdoc.Error) {
	var (
		ae *apiError
		be *cjdoc.BodyError
		qe *cjdoc.QueryError
		ve *cjdoc.ValidationError
	)
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.body
	case errors.As(err, &be):
		return http.StatusBadRequest, be.CJError()
	case errors.As(err, &qe):
		return http.StatusBadRequest, qe.CJError()
	case errors.As(err, &ve):
		return http.StatusUnprocessableEntity, ve.CJError()
	case errors.Is(err, models.ErrNotFound):
		return errNotFound.status, errNotFound.body
	case errors.Is(err, models.ErrStale):
		return errStale.status, errStale.body
	case errors.Is(err, models.ErrConflict):
		return http.StatusConflict, conflict("The write conflicts with another item.").body
	}
	return http.StatusInternalServerError, cjdoc.Error{Title: "Internal server error", Code: codeInternal}
}

// errorsMiddleware renders the error a handler recorded as a C+J error
// document. Internal errors are logged with the request id, never sent.
func (s *Server) errorsMiddleware(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 || c.Writer.Written() {
		return
	}
	err := c.Errors.Last().Err
	status, body := statusOf(err)
	if status == http.StatusInternalServerError {
		id := web.RequestID(c)
		s.Log.Error("C+J request failed", "request_id", id, "method", c.Request.Method, "path", c.Request.URL.Path, "error", err)
		body.Message = "Internal server error (request " + id + ")."
	}
	if status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Basic realm="storage"`)
	}
	writeDoc(c, status, cjdoc.ErrorDocument(web.AbsURL(c, c.Request.URL.RequestURI()), body))
}

// writeDoc sends a C+J document.
func writeDoc(c *gin.Context, status int, doc cjdoc.Document) {
	c.Render(status, cjRender{doc})
}
