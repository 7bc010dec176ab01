package auth

import (
	"context"
	"errors"
	"strings"
	"time"

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

const (
	principalKey   = "principal"
	generationsKey = "generations"
)

// Current returns the request's principal; Authenticate guarantees one on
// every authenticated route.
func Current(c *gin.Context) *Principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(*Principal)
	return pr
}

// RequestGenerations are the generations read when the request was
// authenticated: what a handler renders after that read shows every change
// they count up to them, so a rendering kept under them is current while
// a later request reads the same.
func RequestGenerations(c *gin.Context) (models.Generations, bool) {
	g, _ := c.Get(generationsKey)
	gens, ok := g.(models.Generations)
	return gens, ok
}

// Authenticate accepts "Bearer <access token>" and "Api-Key <key>" and
// answers 401 otherwise. Callers are cached by credential (see
// principalCache), so a request with a known token costs one small query.
func Authenticate(db bun.IDB, tokens *Tokens) gin.HandlerFunc {
	cache := &principalCache{}
	reads := newSharedReads(func(ctx context.Context) (models.Generations, error) {
		return models.ReadGenerations(ctx, db)
	})
	return func(c *gin.Context) {
		p, err := cache.authenticate(c, db, reads, tokens)
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

// authenticate is the request's caller, from the cache when the
// credential is known and nothing about users, groups, permissions or
// keys changed since (models.Generations), else from the database. The
// generations, read after the request came (sharedReads), stay with it
// (RequestGenerations).
func (pc *principalCache) authenticate(c *gin.Context, db bun.IDB, reads *sharedReads, tokens *Tokens) (*Principal, error) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	scheme, cred = strings.ToLower(scheme), strings.TrimSpace(cred)
	if cred == "" || (scheme != "bearer" && scheme != "api-key") {
		return nil, web.ErrUnauthenticated
	}
	ctx := c.Request.Context()
	gens, err := reads.get(ctx)
	if err != nil {
		return nil, err
	}
	c.Set(generationsKey, gens)
	key := scheme + " " + cred
	if p := pc.get(gens.Auth, key, tokens.now()); p != nil {
		return p, nil
	}
	p := new(Principal)
	var expires time.Time
	if scheme == "bearer" {
		claims, err := tokens.Parse(cred, TypeAccess)
		if err == nil {
			p.User, err = owner(ctx, db, claims)
		}
		if errors.Is(err, ErrBadToken) {
			return nil, web.ErrUnauthenticated
		} else if err != nil {
			return nil, err
		}
		expires = claims.ExpiresAt.Time
	} else {
		k, err := models.ClientKeyUser(ctx, db, cred)
		if errors.Is(err, models.ErrNotFound) || (err == nil && !k.User.IsActive) {
			return nil, web.ErrUnauthenticated
		} else if err != nil {
			return nil, err
		}
		p.User, p.ClientKey = k.User, k
	}
	if !p.User.IsSuperuser { // Can grants a superuser everything
		if p.perms, err = models.PermissionSet(ctx, db, p.User); err != nil {
			return nil, err
		}
	}
	pc.put(gens.Auth, key, p, expires)
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
