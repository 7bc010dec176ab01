package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// Auth roles of the storage-management (C+J) API. A writer holds both.
const (
	// RoleStorageAdmin may create, change and delete C+J items.
	RoleStorageAdmin = "storage-admin"
	// RoleStorageReader may read C+J items.
	RoleStorageReader = "storage-reader"
)

// Hub permissions the C+J roles come from: managing storage is managing
// spaces, so change_space makes a storage-admin and view_space a
// storage-reader.
const (
	cjWritePermission = "change_space"
	cjReadPermission  = "view_space"
)

// CJRoles returns the C+J roles of a user holding perms, writer first.
func CJRoles(u *models.User, perms map[string]bool) []string {
	roles := []string{}
	if u.IsSuperuser || perms[cjWritePermission] {
		roles = append(roles, RoleStorageAdmin)
	}
	if u.IsSuperuser || perms[cjReadPermission] || perms[cjWritePermission] {
		roles = append(roles, RoleStorageReader)
	}
	return roles
}

// CJIdentity is the verified caller of a C+J request.
type CJIdentity struct {
	User   *models.User
	Roles  []string
	Claims *Claims
}

// Has reports whether the caller holds role.
func (id *CJIdentity) Has(role string) bool { return slices.Contains(id.Roles, role) }

// CJAuthenticate verifies a C+J token and derives the caller's roles from
// the user's permissions now, so that a permission withdrawn or a user
// deactivated takes effect at once. A bad token, or a missing or inactive
// user, is ErrBadToken.
func CJAuthenticate(ctx context.Context, db bun.IDB, tokens *Tokens, token string) (*CJIdentity, error) {
	claims, err := tokens.Parse(token, TypeCJ)
	if err != nil {
		return nil, err
	}
	u, err := tokens.User(ctx, db, token, TypeCJ)
	if err != nil {
		return nil, err
	}
	perms, err := models.PermissionSet(ctx, db, u)
	if err != nil {
		return nil, err
	}
	return &CJIdentity{User: u, Roles: CJRoles(u, perms), Claims: claims}, nil
}

// CJToken returns the token of a C+J request: the basic-auth user name
// sent with an empty password (curl -u TOKEN:), or a Bearer token; with
// allowQuery also the access_token query parameter. It returns "" when
// there is none.
func CJToken(r *http.Request, allowQuery bool) string {
	if user, pass, ok := r.BasicAuth(); ok {
		if pass != "" {
			return "" // a user name and password are not a token
		}
		return user
	}
	scheme, cred, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if strings.EqualFold(scheme, "bearer") {
		return strings.TrimSpace(cred)
	}
	if allowQuery {
		return r.URL.Query().Get("access_token")
	}
	return ""
}

// OAuth2Server is the C+J API's authentication server: an OAuth 2.0
// password grant (RFC 6749 section 4.3) issuing C+J tokens, and a token
// information endpoint listing a token's roles.
type OAuth2Server struct {
	DB     *bun.DB
	Tokens *Tokens
	Log    *slog.Logger
}

// oauthForm bounds the token request body; the form has three short fields.
const oauthForm = 64 << 10

// oauthError is an RFC 6749 section 5.2 error answer.
type oauthError struct {
	status      int
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func oauthErr(status int, code, desc string) *oauthError {
	return &oauthError{status: status, Code: code, Description: desc}
}

// Handler returns the token server's routes.
func (s *OAuth2Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.Use(web.RequestIDs(s.Log), web.Route, web.Recover(s.Log), s.errors)
	r.NoRoute(func(c *gin.Context) {
		_ = c.Error(oauthErr(http.StatusNotFound, "not_found", "The token server serves POST /oauth2/token and GET /tokeninfo."))
	})
	r.NoMethod(func(c *gin.Context) {
		_ = c.Error(oauthErr(http.StatusMethodNotAllowed, "invalid_request", "Method "+c.Request.Method+" is not allowed here."))
	})
	r.POST("/oauth2/token", s.token)
	for _, p := range []string{"/tokeninfo", "/oauth2/token_info"} {
		r.GET(p, s.tokenInfo)
		r.HEAD(p, s.tokenInfo)
	}
	return r
}

// errors renders the error a handler recorded, in RFC 6749 form.
func (s *OAuth2Server) errors(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 || c.Writer.Written() {
		return
	}
	err := c.Errors.Last().Err
	var oe *oauthError
	if !errors.As(err, &oe) {
		id := web.RequestID(c)
		s.Log.Error("token server request failed", "request_id", id, "path", c.Request.URL.Path, "error", err)
		oe = oauthErr(http.StatusInternalServerError, "server_error", "Internal server error (request "+id+").")
	}
	switch {
	case oe.status == http.StatusUnauthorized:
		h := `Bearer realm="storage"`
		if oe.Code == "invalid_token" {
			h += `, error="invalid_token"`
		}
		c.Header("WWW-Authenticate", h)
	case oe.status == http.StatusMethodNotAllowed:
		if strings.HasPrefix(c.Request.URL.Path, "/oauth2/token_info") || c.Request.URL.Path == "/tokeninfo" {
			c.Header("Allow", "GET, HEAD")
		} else {
			c.Header("Allow", "POST")
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(oe.status, oe)
}

// token answers the password grant.
func (s *OAuth2Server) token(c *gin.Context) {
	if err := s.grant(c); err != nil {
		_ = c.Error(err)
	}
}

func (s *OAuth2Server) grant(c *gin.Context) error {
	bad := func(desc string) error { return oauthErr(http.StatusBadRequest, "invalid_request", desc) }
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return bad("Send the parameters as application/x-www-form-urlencoded.")
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, oauthForm)
	if err := c.Request.ParseForm(); err != nil {
		return bad("The form could not be read.")
	}
	form := c.Request.PostForm
	for _, k := range []string{"grant_type", "username", "password"} {
		if len(form[k]) > 1 {
			return bad("The parameter " + k + " is repeated.")
		}
	}
	switch gt := form.Get("grant_type"); {
	case gt == "":
		return bad("The parameter grant_type is missing.")
	case gt != "password":
		return oauthErr(http.StatusBadRequest, "unsupported_grant_type", "Only grant_type=password is supported.")
	}
	username, password := form.Get("username"), form.Get("password")
	var missing []string
	if username == "" {
		missing = append(missing, "username")
	}
	if password == "" {
		missing = append(missing, "password")
	}
	if len(missing) > 0 {
		return bad("Missing parameter: " + strings.Join(missing, ", ") + ".")
	}
	// No user name or password holds such text (the hub API refuses it
	// when they are set), and no database takes NUL in a query.
	for _, k := range []string{"username", "password"} {
		if v := form.Get(k); strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return bad("The parameter " + k + " holds a null character or is not valid UTF-8.")
		}
	}
	done, wait := s.Tokens.Throttle.Allow(c.Request, username)
	if wait > 0 {
		// slow_down is the token endpoint's error for a client that must
		// wait (RFC 8628 section 3.5); Retry-After says how long.
		secs := int(wait / time.Second)
		c.Header("Retry-After", strconv.Itoa(secs))
		return oauthErr(http.StatusTooManyRequests, "slow_down",
			fmt.Sprintf("Too many failed attempts. Try again in %d seconds.", secs))
	}
	ctx := c.Request.Context()
	u, err := models.GetUser(ctx, s.DB, username)
	wrong := errors.Is(err, models.ErrNotFound) || (err == nil && (!u.IsActive || !u.CheckPassword(password)))
	done(wrong)
	if wrong {
		return oauthErr(http.StatusBadRequest, "invalid_grant", "The user name or password is incorrect, or the account is inactive.")
	} else if err != nil {
		return err
	}
	perms, err := models.PermissionSet(ctx, s.DB, u)
	if err != nil {
		return err
	}
	if err := models.TouchLogin(ctx, s.DB, u); err != nil {
		return err
	}
	roles := CJRoles(u, perms)
	tok, err := s.Tokens.IssueCJ(u, roles)
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.JSON(http.StatusOK, gin.H{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(CJLifetime / time.Second),
		"scope": strings.Join(roles, " "),
	})
	return nil
}

// tokenInfo describes the caller's token: its user and current roles.
func (s *OAuth2Server) tokenInfo(c *gin.Context) {
	tok := CJToken(c.Request, true)
	if tok == "" {
		_ = c.Error(oauthErr(http.StatusUnauthorized, "invalid_request",
			"No token: send it as the basic-auth user name with an empty password, as a Bearer token, or as access_token."))
		return
	}
	id, err := CJAuthenticate(c.Request.Context(), s.DB, s.Tokens, tok)
	if errors.Is(err, ErrBadToken) {
		_ = c.Error(oauthErr(http.StatusUnauthorized, "invalid_token", "The token is invalid or expired, or its user is inactive."))
		return
	} else if err != nil {
		_ = c.Error(err)
		return
	}
	exp := id.Claims.ExpiresAt.Time
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{
		"active": true, "username": id.User.Username, "user_id": id.User.ID,
		"roles": id.Roles, "scope": strings.Join(id.Roles, " "), "token_type": "Bearer",
		"issued_at": id.Claims.IssuedAt.Unix(), "exp": exp.Unix(),
		"expires_in": max(int64(exp.Sub(s.Tokens.now())/time.Second), 0),
	})
}
