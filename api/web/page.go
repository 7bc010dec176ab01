package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// Page size limits of every paginated list (spec: Limits).
const (
	MinPageSize = 20
	MaxPageSize = 100
)

// PageResponse is the envelope of a paginated list.
type PageResponse struct {
	Count    int     `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  any     `json:"results"`
}

// pageParams reads page and page_size: page_size empty, invalid or below 20
// gives 20, above 100 gives 100, 0 disables pagination. A page that is not
// a positive integer is 404, as is a page past the end.
func pageParams(c *gin.Context) (page, size int, err error) {
	size = MinPageSize
	if s := c.Query("page_size"); s != "" {
		if n, convErr := strconv.Atoi(s); convErr == nil {
			switch {
			case n == 0:
				size = 0
			case n > MaxPageSize:
				size = MaxPageSize
			case n > MinPageSize:
				size = n
			}
		}
	}
	page = 1
	if s := c.Query("page"); s != "" {
		n, convErr := strconv.Atoi(s)
		// A page whose offset does not fit in an int is past any list.
		if convErr != nil || n < 1 || n > math.MaxInt/max(size, MaxPageSize) {
			return 0, 0, Errorf(http.StatusNotFound, "Invalid page.")
		}
		page = n
	}
	return page, size, nil
}

// Paginate runs the query that query builds over a slice of T for the
// requested page and writes the envelope with each row rendered by render.
func Paginate[T any](c *gin.Context, query func(dest *[]T) *bun.SelectQuery, render func(*T) any) error {
	return PaginateWith(c, nil, query, render)
}

// PaginateWith is Paginate with extra top-level keys beside count, next,
// previous and results (e.g. the owners of the jobs list). Extra keys
// never replace the envelope's own.
func PaginateWith[T any](c *gin.Context, extra map[string]any, query func(dest *[]T) *bun.SelectQuery, render func(*T) any) error {
	p, err := PageOf(c, query, render)
	if err != nil {
		return err
	}
	return writeEnvelope(c, extra, p)
}

// PageJSON is the body Paginate writes, for a list that keeps its pages
// (WriteJSON writes one kept).
func PageJSON[T any](c *gin.Context, query func(dest *[]T) *bun.SelectQuery, render func(*T) any) ([]byte, error) {
	p, err := PageOf(c, query, render)
	if err != nil {
		return nil, err
	}
	return envelopeJSON(nil, p)
}

// WriteJSON answers 200 with body, JSON already rendered.
func WriteJSON(c *gin.Context, body []byte) {
	c.Data(http.StatusOK, "application/json; charset=utf-8", body)
}

// CountedPageJSON is the body of a page (with the extra keys) of a list
// that finds its rows its own way: count gives the total (a number the
// database keeps, or a count), and rows reads the page in the window it
// is given. A page past the middle of the list is asked for from the
// list's end, so the total is read before any page but the first. A first
// page that is not full is the whole list and needs no count (as in
// ScanPage); a full one does, and the total is read beside its rows, so
// that where the database answers several statements at once
// (PostgreSQL's pool) the page waits for one round trip instead of two.
// WriteJSON writes it.
func CountedPageJSON[T any](c *gin.Context, extra map[string]any, rows func(ctx context.Context, w models.Window) ([]T, error),
	count func(ctx context.Context) (int, error), render func(*T) any) ([]byte, error) {
	ctx := c.Request.Context()
	page, size, err := pageParams(c)
	if err != nil {
		return nil, err
	}
	n := -1
	var beside struct {
		n   int
		err error
	}
	var counting sync.WaitGroup
	switch {
	case size == 0:
	case page > 1:
		if n, err = count(ctx); err != nil {
			return nil, err
		}
	default:
		counting.Go(func() { beside.n, beside.err = count(ctx) })
	}
	got, err := rows(ctx, window(page, size, n))
	counting.Wait() // no read outlives the request
	if err != nil {
		return nil, err
	}
	switch {
	case n >= 0:
	case size == 0 || len(got) < size:
		n = len(got)
	case beside.err != nil:
		return nil, beside.err
	default:
		n = beside.n
	}
	out := make([]any, len(got))
	for i := range got {
		out[i] = render(&got[i])
	}
	p, err := envelope(c, out, n, page, size)
	if err != nil {
		return nil, err
	}
	return envelopeJSON(extra, p)
}

// window is the window of page (of size rows; 0: every row) in a list of
// n rows (-1: not read): its rows from the list's start, or from its end
// when the page begins past the middle. A page past the end is asked for
// from the start (and is empty unless rows were added since n was read).
func window(page, size, n int) models.Window {
	offset := (page - 1) * size
	if n < 0 || size == 0 || offset <= n/2 || offset >= n {
		return models.Window{Limit: size, Offset: offset}
	}
	end := min(offset+size, n)
	return models.Window{Limit: end - offset, Offset: n - end, FromEnd: true}
}

// PageOf runs the query for the requested page like Paginate but returns
// the envelope instead of writing it, for answers that nest a page inside
// a larger object.
func PageOf[T any](c *gin.Context, query func(dest *[]T) *bun.SelectQuery, render func(*T) any) (*PageResponse, error) {
	page, size, err := pageParams(c)
	if err != nil {
		return nil, err
	}
	var rows []T
	count, err := ScanPage(c, query(&rows), &rows, page, size)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(rows))
	for i := range rows {
		out[i] = render(&rows[i])
	}
	return envelope(c, out, count, page, size)
}

// PaginateSlice writes one page of an in-memory list.
func PaginateSlice[T any](c *gin.Context, items []T, render func(*T) any) error {
	page, size, err := pageParams(c)
	if err != nil {
		return err
	}
	lo, hi := 0, len(items)
	if size > 0 {
		lo = min((page-1)*size, len(items))
		hi = min(lo+size, len(items))
	}
	out := make([]any, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, render(&items[i]))
	}
	return WritePage(c, out, len(items), page, size)
}

// PageParams returns the page and page size a list request asks for (size
// 0: unpaginated), for lists that must post-process a page before writing
// it with WritePage.
func PageParams(c *gin.Context) (page, size int, err error) { return pageParams(c) }

// ScanPage runs q, which scans into rows, for the page (all rows when
// size is 0) and returns the total count of rows q matches. A page that
// is not full is the last one, so its total needs no count query: most
// lists (sites, spaces, users...) fit in one page.
func ScanPage[T any](c *gin.Context, q *bun.SelectQuery, rows *[]T, page, size int) (int, error) {
	ctx := c.Request.Context()
	if size == 0 {
		n, err := q.ScanAndCount(ctx)
		return int(n), err
	}
	offset := (page - 1) * size
	if err := q.Limit(int64(size)).Offset(int64(offset)).Scan(ctx); err != nil {
		return 0, err
	}
	if n := len(*rows); n < size && (n > 0 || page == 1) {
		return offset + n, nil
	}
	n, err := q.Count(ctx)
	return int(n), err
}

// WritePage writes the envelope for an already-fetched page.
func WritePage(c *gin.Context, results []any, count, page, size int) error {
	return WritePageWith(c, nil, results, count, page, size)
}

// WritePageWith is WritePage with extra top-level keys beside the
// envelope's own, which they never replace.
func WritePageWith(c *gin.Context, extra map[string]any, results []any, count, page, size int) error {
	p, err := envelope(c, results, count, page, size)
	if err != nil {
		return err
	}
	return writeEnvelope(c, extra, p)
}

// envelope builds the page answer; a page past the end is 404.
func envelope(c *gin.Context, results []any, count, page, size int) (*PageResponse, error) {
	if page > 1 && len(results) == 0 {
		return nil, Errorf(http.StatusNotFound, "Invalid page.")
	}
	p := &PageResponse{Count: count, Results: results}
	if size > 0 {
		if page*size < count {
			p.Next = pageLink(c, page+1)
		}
		if page > 1 {
			p.Previous = pageLink(c, page-1)
		}
	}
	return p, nil
}

// writeEnvelope writes the page as c.JSON writes the map of its keys and
// extra's (encoding/json: sorted keys, HTML escaped), except that a row
// already rendered to JSON (json.RawMessage made by json.Marshal, see
// JSONCache) is copied as it is: encoding/json would parse it again,
// which costs as much as rendering it.
func writeEnvelope(c *gin.Context, extra map[string]any, p *PageResponse) error {
	body, err := envelopeJSON(extra, p)
	if err != nil {
		return err
	}
	WriteJSON(c, body)
	return nil
}

// envelopeJSON renders p with the extra keys.
func envelopeJSON(extra map[string]any, p *PageResponse) ([]byte, error) {
	body := make(map[string]any, len(extra)+4)
	for k, v := range extra {
		body[k] = v
	}
	body["count"], body["next"], body["previous"], body["results"] = p.Count, p.Next, p.Previous, p.Results
	rows, _ := p.Results.([]any)
	size, raw := rawSize(rows)
	var buf bytes.Buffer
	buf.Grow(size + 1024)
	buf.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(body)) {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeJSON(&buf, k); err != nil {
			return nil, err
		}
		buf.WriteByte(':')
		if k != "results" || !raw {
			if err := writeJSON(&buf, body[k]); err != nil {
				return nil, err
			}
			continue
		}
		buf.WriteByte('[')
		for j, r := range rows {
			if j > 0 {
				buf.WriteByte(',')
			}
			if kept, ok := r.(json.RawMessage); ok {
				buf.Write(kept)
			} else if err := writeJSON(&buf, r); err != nil {
				return nil, err
			}
		}
		buf.WriteByte(']')
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// rawSize is the size of the rows of results rendered ahead, if any: a
// page of them is written in a buffer grown once for them and each of
// its other rows is marshaled alone; a page of none is marshaled whole.
func rawSize(results []any) (n int, some bool) {
	for _, r := range results {
		if raw, ok := r.(json.RawMessage); ok {
			n, some = n+len(raw)+1, true
		}
	}
	return n, some
}

// writeJSON appends v as json.Marshal writes it.
func writeJSON(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("render JSON: %w", err)
	}
	buf.Write(b)
	return nil
}

func pageLink(c *gin.Context, page int) *string {
	u := url.URL{Path: c.Request.URL.Path}
	q := c.Request.URL.Query()
	q.Set("page", strconv.Itoa(page))
	u.RawQuery = q.Encode()
	s := AbsURL(c, u.String())
	return &s
}
