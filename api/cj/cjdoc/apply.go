package cjdoc

import (
	"slices"
	"strings"
)

// Apply runs q over docs: it keeps the documents q.Where matches, sorts them stably
// by q.Sort, cuts out page q.Page of q.MaxResults documents and projects them. total
// is the number of matches before paging. A page past the end is empty, not nil. docs
// and the maps in it are never changed; without a projection the page holds the
// input maps themselves.
//
// Sorting follows MongoDB: a missing field sorts first in ascending order; values of
// different types sort by type (missing, null, numbers, strings, objects, arrays,
// booleans, times); numbers compare by value whatever their Go type; an array field
// sorts by its smallest element ascending and its largest descending.
func Apply(docs []map[string]any, q Query) (page []map[string]any, total int) {
	matched := make([]map[string]any, 0, len(docs))
	for _, d := range docs {
		if q.Where.Match(d) {
			matched = append(matched, d)
		}
	}
	if len(q.Sort) > 0 {
		matched = sortDocs(matched, q.Sort)
	}
	total = len(matched)
	start, end := pageBounds(total, q.Page, q.MaxResults)
	page = make([]map[string]any, 0, end-start)
	for _, d := range matched[start:end] {
		page = append(page, q.Projection.Apply(d))
	}
	return page, total
}

// sortDocs computes each document's sort values once, rather than in every
// comparison, and sorts stably on them.
func sortDocs(docs []map[string]any, keys []SortKey) []map[string]any {
	type row struct {
		doc  map[string]any
		vals []any
	}
	paths := make([][]string, len(keys))
	for i, k := range keys {
		paths[i] = strings.Split(k.Field, ".")
	}
	rows := make([]row, len(docs))
	for i, d := range docs {
		vals := make([]any, len(keys))
		for j, k := range keys {
			vals[j] = sortValue(d, paths[j], k.Descending)
		}
		rows[i] = row{d, vals}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		for j, k := range keys {
			c := compareValues(a.vals[j], b.vals[j])
			if k.Descending {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = r.doc
	}
	return out
}

// sortValue is the value a document sorts by: among the values at path, with arrays
// opened one level, the smallest for an ascending sort and the largest for a
// descending one; missingValue when there is none (so an empty array sorts as
// missing).
func sortValue(doc map[string]any, path []string, desc bool) any {
	var best any = missingValue{}
	consider := func(v any) {
		if kindOf(v) == kindMissing {
			return
		}
		if kindOf(best) == kindMissing {
			best = v
			return
		}
		c := compareValues(v, best)
		if (desc && c > 0) || (!desc && c < 0) {
			best = v
		}
	}
	for _, v := range lookup(doc, path) {
		if l, ok := asList(v); ok {
			for _, e := range l {
				consider(e)
			}
			continue
		}
		consider(v)
	}
	return best
}

// pageBounds returns the slice bounds of a page, guarding against overflow from page
// numbers and sizes a client chose.
func pageBounds(total, page, size int) (start, end int) {
	if size <= 0 {
		return 0, total
	}
	page = max(page, 1)
	if page > lastPage(total, size) || total == 0 {
		return total, total
	}
	start = (page - 1) * size
	end = total
	if size < total-start {
		end = start + size
	}
	return start, end
}

// lastPage is the number of the last page, 1 when there are no matches.
func lastPage(total, size int) int {
	if size <= 0 || total <= 0 {
		return 1
	}
	n := total / size
	if total%size != 0 {
		n++
	}
	return n
}
