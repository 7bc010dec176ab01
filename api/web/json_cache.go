package web

import (
	"cmp"
	"encoding/json"
	"sync"
)

// JSONCache keeps rows rendered to JSON, each under a key that changes
// whenever its rendering would (a row's id and version, and the request's
// base URL), so a list renders a row once rather than at every request
// and writes it as it is (writeEnvelope). A stale entry is never found,
// only crowded out. Safe for concurrent use; the zero value is ready.
type JSONCache[K comparable] struct {
	// Max bounds the entries kept (jsonCacheMax when 0): a tenth of them
	// go when it is reached.
	Max int

	mu   sync.Mutex
	rows map[K]json.RawMessage
}

// jsonCacheMax is the default bound: rows of about 1 KiB.
const jsonCacheMax = 10_000

// Get is the rendering kept under key.
func (c *JSONCache[K]) Get(key K) (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, ok := c.rows[key]
	return raw, ok
}

// Render renders v, keeps it under key and returns it; v is returned as
// it is when it has no JSON form (the page's writer then reports why).
func (c *JSONCache[K]) Render(key K, v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	c.Put(key, raw)
	return json.RawMessage(raw)
}

// Put keeps raw, JSON already rendered, under key.
func (c *JSONCache[K]) Put(key K, raw []byte) {
	limit := cmp.Or(c.Max, jsonCacheMax)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = make(map[K]json.RawMessage)
	}
	if len(c.rows) >= limit {
		for k := range c.rows { // in no particular order
			delete(c.rows, k)
			if len(c.rows) < limit*9/10 {
				break
			}
		}
	}
	c.rows[key] = raw
}
