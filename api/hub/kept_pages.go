package hub

import (
	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// listPage names a whole page of a list as rendered: at the generations
// its rendering reads (models.Generations; the sites list reads no jobs),
// for a host (its links), a query (the page, its size, the filters, the
// links to the pages beside it) and a caller who may or may not edit
// what the list shows.
type listPage struct {
	sites       int64
	jobs        string
	base, query string
	editable    bool
}

// servePage answers with the page of a list kept in pages under the
// request's generations, as gens picks them (false: keep nothing), or
// with the page build renders, kept when build says it does not move
// with the clock and it is a page, not a whole list (page_size=0, of any
// length). Anything a page shows changed by anyone since moved the
// generations it is kept under, so a kept page shows every change the
// database held when the request was authenticated: what the page was
// rendered from was read after them.
func servePage(c *gin.Context, pages *web.JSONCache[listPage], gens func(models.Generations) (listPage, bool),
	build func() (body []byte, timeless bool, err error)) error {
	g, authenticated := auth.RequestGenerations(c)
	key, ok := gens(g)
	ok = ok && authenticated
	key.base, key.query = web.AbsURL(c, ""), c.Request.URL.RawQuery
	if body, kept := pages.Get(key); ok && kept {
		web.WriteJSON(c, body)
		return nil
	}
	body, timeless, err := build()
	if err != nil {
		return err
	}
	if _, size, _ := web.PageParams(c); ok && timeless && size > 0 {
		pages.Put(key, body)
	}
	web.WriteJSON(c, body)
	return nil
}

// renderedRow names a row's rendering in a list: the row's key (id and
// version) and the base URL of its links.
type renderedRow struct {
	models.RowKey
	base string
}

// keptPage renders the rows of keys, a page of a list in its order,
// through cache: a row it holds rendered at the row's version (for this
// request's base URL) is taken as it is, and only the others are read
// (read, by id) and rendered, so a list whose rows did not change since
// it was last shown reads no row. key gives a row's key and whether its
// rendering may be kept (false: it moves with the clock). A row deleted
// between the reads of keys and rows is left out; one updated in between
// is shown as read (newer).
func keptPage[R any](c *gin.Context, cache *web.JSONCache[renderedRow], keys []models.RowKey,
	read func(ids []int64) ([]R, error), key func(*R) (models.RowKey, bool), render func(*R) any) ([]any, error) {
	base := web.AbsURL(c, "")
	out := make([]any, len(keys))
	var missing []int64
	for i, k := range keys {
		if raw, ok := cache.Get(renderedRow{k, base}); ok {
			out[i] = raw
		} else {
			missing = append(missing, k.ID)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := read(missing)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*R, len(rows))
	for i := range rows {
		k, _ := key(&rows[i])
		byID[k.ID] = &rows[i]
	}
	page := out[:0]
	for i, k := range keys {
		if out[i] == nil {
			r, ok := byID[k.ID]
			if !ok {
				continue
			}
			if now, keep := key(r); keep {
				out[i] = cache.Render(renderedRow{now, base}, render(r))
			} else {
				out[i] = render(r)
			}
		}
		page = append(page, out[i])
	}
	return page, nil
}

// renderAll renders every row.
func renderAll[R any](rows []R, render func(*R) any) []any {
	out := make([]any, len(rows))
	for i := range rows {
		out[i] = render(&rows[i])
	}
	return out
}
