package auth

import (
	"sync"
	"time"
)

// principalCache remembers authenticated callers by credential, so that a
// request with a token seen before skips the signature check and the user
// and permission queries. An entry is good while the auth generation it
// was loaded at is current (database triggers move it on any change to
// users, groups, permissions or client keys, from any process: a
// deactivation, a deleted key or a permission taken away counts from the
// next request) and, for a token, until the token expires.
type principalCache struct {
	mu  sync.Mutex
	gen int64
	m   map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p       Principal
	expires time.Time // zero: no expiry (client keys)
}

// maxCachedPrincipals bounds the cache (a few hundred bytes an entry):
// past it the cache starts again empty.
const maxCachedPrincipals = 10_000

// get returns a copy of the caller cached for key at generation gen, or
// nil. A newer generation empties the cache.
func (c *principalCache) get(gen int64, key string, now time.Time) *Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		c.gen, c.m = gen, nil
		return nil
	}
	e, ok := c.m[key]
	if !ok {
		return nil
	}
	if !e.expires.IsZero() && !now.Before(e.expires) {
		delete(c.m, key)
		return nil
	}
	p := e.p
	u := *p.User // handlers get their own copy of the user
	p.User = &u
	return &p
}

// put caches p, loaded at generation gen, for key.
func (c *principalCache) put(gen int64, key string, p *Principal, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		if gen < c.gen {
			return // loaded before a change this cache has already seen
		}
		c.gen, c.m = gen, nil
	}
	if c.m == nil || len(c.m) >= maxCachedPrincipals {
		c.m = make(map[string]cachedPrincipal)
	}
	u := *p.User
	c.m[key] = cachedPrincipal{p: Principal{User: &u, ClientKey: p.ClientKey, perms: p.perms}, expires: expires}
}
