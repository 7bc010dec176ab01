package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"
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
		if convErr != nil || n < 1 {
			return 0, 0, Errorf(http.StatusNotFound, "Invalid page.")
		}
		page = n
	}
	return page, size, nil
}

// Paginate runs the query that query builds over a slice of T for the
// requested page and writes the envelope with each row rendered by render.
func Paginate[T any](c *gin.Context, query func(dest *[]T) *bun.SelectQuery, render func(*T) any) error {
	page, size, err := pageParams(c)
	if err != nil {
		return err
	}
	var rows []T
	q := query(&rows)
	var count int
	if size == 0 {
		if err := q.Scan(c.Request.Context()); err != nil {
			return err
		}
		count = len(rows)
	} else {
		n, err := q.Limit(int64(size)).Offset(int64((page - 1) * size)).ScanAndCount(c.Request.Context())
		if err != nil {
			return err
		}
		count = int(n)
	}
	out := make([]any, len(rows))
	for i := range rows {
		out[i] = render(&rows[i])
	}
	return WritePage(c, out, count, page, size)
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

// WritePage writes the envelope for an already-fetched page.
func WritePage(c *gin.Context, results []any, count, page, size int) error {
	if page > 1 && len(results) == 0 {
		return Errorf(http.StatusNotFound, "Invalid page.")
	}
	resp := PageResponse{Count: count, Results: results}
	if size > 0 {
		if page*size < count {
			resp.Next = pageLink(c, page+1)
		}
		if page > 1 {
			resp.Previous = pageLink(c, page-1)
		}
	}
	c.JSON(http.StatusOK, resp)
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
