package auth

import (
	"errors"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	User      *models.User
	ClientKey *models.ClientKey // the key used, nil for tokens
	perms     map[string]bool
}

// Can reports whether the caller holds the permission codename.
func (p *Principal) Can(codename string) bool { return p.User.IsSuperuser || p.perms[codename] }

const principalKey = "principal"

// Current returns the request's principal; Authenticate guarantees one on
// every authenticated route.
func Current(c *gin.Context) *Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(*Principal)
	return pr
}

// Authenticate accepts "Bearer <access token>" and "Api-Key <key>" and
// answers 401 otherwise.
func Authenticate(db bun.IDB, tokens *Tokens) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, err := authenticate(c, db, tokens)
		if err != nil {
			_ = c.Error(err)
			c.Abort()
			return
		}
		c.Set(principalKey, p)
		web.SetUser(c, p.User.Username)
		c.Next()
	}
}

func authenticate(c *gin.Context, db bun.IDB, tokens *Tokens) (*Principal, error) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return nil, web.ErrUnauthenticated
	}
	ctx := c.Request.Context()
	p := new(Principal)
	switch strings.ToLower(scheme) {
	case "bearer":
		u, err := tokens.User(ctx, db, cred, TypeAccess)
		if errors.Is(err, ErrBadToken) {
			return nil, web.ErrUnauthenticated
		} else if err != nil {
			return nil, err
		}
		p.User = u
	case "api-key":
		k, err := models.ClientKeyUser(ctx, db, cred)
		if errors.Is(err, models.ErrNotFound) || (err == nil && !k.User.IsActive) {
			return nil, web.ErrUnauthenticated
		} else if err != nil {
			return nil, err
		}
		p.User, p.ClientKey = k.User, k
	default:
		return nil, web.ErrUnauthenticated
	}
	if p.User.IsSuperuser {
		return p, nil // Can grants a superuser everything
	}
	perms, err := models.PermissionSet(ctx, db, p.User)
	if err != nil {
		return nil, err
	}
	p.perms = perms
	return p, nil
}

// Require answers 403 unless the caller holds every listed permission.
func Require(codenames ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p := Current(c)
		for _, cn := range codenames {
			if p == nil || !p.Can(cn) {
				_ = c.Error(web.ErrForbidden)
				c.Abort()
				return
			}
		}
		c.Next()
	}
}

// CRUD returns the permission middleware for a method on a model:
// GET/HEAD view, POST add, PUT/PATCH change, DELETE delete.
func CRUD(model string) gin.HandlerFunc {
	return func(c *gin.Context) {
		action := "view"
		switch c.Request.Method {
		case "POST":
			action = "add"
		case "PUT", "PATCH":
			action = "change"
		case "DELETE":
			action = "delete"
		}
		Require(models.Codename(action, model))(c)
	}
}
