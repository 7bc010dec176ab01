package hub

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) authRoutes(api *gin.RouterGroup) {
	api.POST("/auth/token/", handle(s.obtainToken))
	api.POST("/auth/token/refresh/", handle(s.refreshToken))
	api.POST("/auth/token/verify/", handle(s.verifyToken))
	api.GET("/auth/token/publickey/", s.publicKey)
	api.POST("/auth/idp/token/", handle(s.idpToken))
}

var errBadCredentials = &web.Error{Status: http.StatusUnauthorized, Detail: "No active account found with the given credentials."}
var errTokenInvalid = &web.Error{Status: http.StatusUnauthorized, Detail: "Token is invalid or expired."}

// tokenInput is the body of POST /api/auth/token/.
type tokenInput struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func (s *Server) obtainToken(c *gin.Context) error {
	var in tokenInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	v := web.ValidationError{}
	v.Check(in.Username != "", "username", "This field is required.")
	v.Check(in.Password != "", "password", "This field is required.")
	if err := v.Err(); err != nil {
		return err
	}
	done, wait := s.Tokens.Throttle.Allow(c.Request, in.Username)
	if wait > 0 {
		return web.TooManyRequests(c, wait)
	}
	ctx := c.Request.Context()
	u, err := models.GetUser(ctx, s.DB, in.Username)
	wrong := errors.Is(err, models.ErrNotFound) || (err == nil && (!u.IsActive || !u.CheckPassword(in.Password)))
	done(wrong)
	if wrong {
		return errBadCredentials
	} else if err != nil {
		return err
	}
	if err := models.TouchLogin(ctx, s.DB, u); err != nil {
		return err
	}
	access, refresh, err := s.Tokens.Pair(u)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, tokenPairResponse{Access: access, Refresh: refresh})
	return nil
}

// refreshTokenInput is the body of POST /api/auth/token/refresh/.
type refreshTokenInput struct {
	Refresh string `json:"refresh"`
}

func (s *Server) refreshToken(c *gin.Context) error {
	var in refreshTokenInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	if in.Refresh == "" {
		return web.Invalid("refresh", "This field is required.")
	}
	done, wait := s.Tokens.Throttle.Allow(c.Request, "")
	if wait > 0 {
		return web.TooManyRequests(c, wait)
	}
	u, err := s.Tokens.User(c.Request.Context(), s.DB, in.Refresh, auth.TypeRefresh)
	done(errors.Is(err, auth.ErrBadToken))
	if errors.Is(err, auth.ErrBadToken) {
		return errTokenInvalid
	} else if err != nil {
		return err
	}
	access, err := s.Tokens.Issue(u, auth.TypeAccess)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, accessTokenResponse{Access: access})
	return nil
}

// verifyTokenInput is the body of POST /api/auth/token/verify/.
type verifyTokenInput struct {
	Token string `json:"token"`
	Type  string `json:"type"`
}

func (s *Server) verifyToken(c *gin.Context) error {
	var in verifyTokenInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	v := web.ValidationError{}
	v.Check(in.Token != "", "token", "This field is required.")
	if in.Type == "" {
		v.Add("type", "This field is required.")
	} else {
		v.Check(in.Type == auth.TypeAccess || in.Type == auth.TypeRefresh, "type", `"`+in.Type+`" is not a valid choice: use access or refresh.`)
	}
	if err := v.Err(); err != nil {
		return err
	}
	_, err := s.Tokens.User(c.Request.Context(), s.DB, in.Token, in.Type)
	if errors.Is(err, auth.ErrBadToken) {
		return errTokenInvalid
	} else if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, emptyResponse{})
	return nil
}

func (s *Server) publicKey(c *gin.Context) {
	c.JSON(http.StatusOK, publicKeyResponse{Algorithm: "EdDSA", PublicKey: s.Tokens.PublicKeyPEM()})
}

// idpTokenInput is the body of POST /api/auth/idp/token/: the identity provider's ID token, as token or id_token.
type idpTokenInput struct {
	Token   string `json:"token"`
	IDToken string `json:"id_token"`
}

// idpToken exchanges an ID token of the configured OIDC issuer for hub
// tokens and the local user's record.
func (s *Server) idpToken(c *gin.Context) error {
	var in idpTokenInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	raw := in.Token
	if raw == "" {
		raw = in.IDToken
	}
	if raw == "" {
		return web.Invalid("token", "This field is required.")
	}
	done, wait := s.Tokens.Throttle.Allow(c.Request, "")
	if wait > 0 {
		return web.TooManyRequests(c, wait)
	}
	ctx := c.Request.Context()
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		done(false)
		return err
	}
	claims, err := s.IDP.Verify(ctx, raw, time.Duration(conf.IDPJWKSTimeout)*time.Second)
	done(errors.Is(err, auth.ErrBadToken))
	switch {
	case errors.Is(err, auth.ErrIDPDisabled):
		return web.Errorf(http.StatusNotFound, "No identity provider is configured.")
	case errors.Is(err, auth.ErrBadToken):
		return web.Errorf(http.StatusUnauthorized, "The identity provider token is invalid: %v", err)
	case err != nil:
		s.Log.Warn("identity provider unavailable", "error", err)
		return web.Errorf(http.StatusBadGateway, "The identity provider could not be reached.")
	}
	u, err := auth.LinkUser(ctx, s.DB, claims)
	if errors.Is(err, auth.ErrBadToken) {
		return web.Errorf(http.StatusUnauthorized, "%v", err)
	} else if err != nil {
		return err
	}
	if err := models.TouchLogin(ctx, s.DB, u); err != nil {
		return err
	}
	access, refresh, err := s.Tokens.Pair(u)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, idpTokenResponse{tokenPairResponse{Access: access, Refresh: refresh}, renderUser(c, u)})
	return nil
}
