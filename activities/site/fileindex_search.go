package site

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SizeRange bounds a size in bytes; either end may be left out.
type SizeRange struct {
	Min *int64 `json:"min,omitempty"`
	Max *int64 `json:"max,omitempty"`
}

// TimeRange bounds a time: After <= t < Before; either end may be left out.
type TimeRange struct {
	After  *time.Time `json:"after,omitempty"`
	Before *time.Time `json:"before,omitempty"`
}

// SearchFilters select entries of the file index; every filter given
// must hold (docs/search-analytics.md shows the JSON).
type SearchFilters struct {
	// Name is a glob on the entry's name (not its path): * any run of
	// characters, ? one character, [abc] or [a-z] one of a set.
	// Case-sensitive. A name without those is an exact name.
	Name string `json:"name,omitempty"`
	// Type keeps these entry types: file, directory, symlink.
	Type []string `json:"type,omitempty"`
	// Size bounds the logical size (a stub's original size).
	Size *SizeRange `json:"size,omitempty"`
	// Mtime, Atime and Ctime bound the entry's times.
	Mtime *TimeRange `json:"mtime,omitempty"`
	Atime *TimeRange `json:"atime,omitempty"`
	Ctime *TimeRange `json:"ctime,omitempty"`
	// State keeps these migration states: resident, premigrated, migrated.
	State []State `json:"state,omitempty"`
	// Tags keeps entries carrying every one of these tags.
	Tags []string `json:"tags,omitempty"`
	// Metadata keeps entries whose field holds the value ("*": any value).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// FilterError names the filter that is wrong ("filters.size.min").
type FilterError struct{ Field, Reason string }

func (e *FilterError) Error() string { return e.Field + ": " + e.Reason }

// Validate checks the filters; the error is a *FilterError.
func (f SearchFilters) Validate() error {
	bad := func(field, reason string) error { return &FilterError{Field: "filters." + field, Reason: reason} }
	if f.Name != "" && !validGlob(f.Name) {
		return bad("name", "a glob on a name: * ? and [sets], no / and balanced brackets")
	}
	for _, t := range f.Type {
		if t != TypeFile && t != TypeDirectory && t != TypeSymlink {
			return bad("type", fmt.Sprintf("%q is not one of file, directory, symlink", t))
		}
	}
	if s := f.Size; s != nil {
		if (s.Min != nil && *s.Min < 0) || (s.Max != nil && *s.Max < 0) {
			return bad("size", "sizes are bytes, 0 or more")
		}
		if s.Min != nil && s.Max != nil && *s.Min > *s.Max {
			return bad("size", "min is above max")
		}
	}
	for name, r := range map[string]*TimeRange{"mtime": f.Mtime, "atime": f.Atime, "ctime": f.Ctime} {
		if r != nil && r.After != nil && r.Before != nil && !r.After.Before(*r.Before) {
			return bad(name, "after must come before before")
		}
	}
	for _, s := range f.State {
		if s != Resident && s != Premigrated && s != Migrated {
			return bad("state", fmt.Sprintf("%q is not one of resident, premigrated, migrated", s))
		}
	}
	for _, t := range f.Tags {
		if !ValidTag(t) {
			return bad("tags", fmt.Sprintf("%q is not a tag", t))
		}
	}
	for k, v := range f.Metadata {
		if !ValidMetaKey(k) {
			return bad("metadata", fmt.Sprintf("%q is not a metadata field name", k))
		}
		if len(v) > MaxMetaValue {
			return bad("metadata", fmt.Sprintf("the value of %q is too long", k))
		}
	}
	return nil
}

// validGlob accepts sqlite GLOB patterns over a single name.
func validGlob(g string) bool {
	if strings.ContainsAny(g, "/\x00") || len(g) > 1024 {
		return false
	}
	depth := 0
	for _, r := range g {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		}
		if depth < 0 || depth > 1 {
			return false
		}
	}
	return depth == 0
}

// FoundFile is one entry a search found.
type FoundFile struct {
	Path  string    `json:"path"`
	Name  string    `json:"name"`
	Type  string    `json:"type"`
	Size  int64     `json:"size"`
	Mtime time.Time `json:"mtime"`
	Atime time.Time `json:"atime"`
	Ctime time.Time `json:"ctime"`
	State State     `json:"state"`
	// Metadata holds the fields asked for that the entry has; "tags" its
	// tags when they were asked for.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// IndexQuery is one page of a search of the file index.
type IndexQuery struct {
	Path      string
	Recursive bool
	Filters   SearchFilters
	// Fields are the metadata fields to return ("*": all, "tags": the
	// tags).
	Fields []string
	// After is the last path of the previous page; pages run in path order.
	After string
	Limit int
}

// Query answers one page from the index: up to q.Limit entries after
// q.After, and the cursor of the next page ("" when this is the last).
func (x *FileIndex) Query(ctx context.Context, q IndexQuery) ([]FoundFile, string, error) {
	if err := q.Filters.Validate(); err != nil {
		return nil, "", err
	}
	rel, err := cleanRel(q.Path)
	if err != nil {
		return nil, "", err
	}
	scope := apiPath(rel)
	var where []string
	var args []any
	if q.Recursive {
		lo, hi := subtreeRange(scope)
		where, args = append(where, "path > ? AND path < ?"), append(args, lo, hi)
	} else {
		where, args = append(where, "parent = ?"), append(args, scope)
	}
	f := q.Filters
	switch {
	case f.Name == "":
	case !strings.ContainsAny(f.Name, "*?["):
		where, args = append(where, "name = ?"), append(args, f.Name)
	default:
		where, args = append(where, "name GLOB ?"), append(args, f.Name)
	}
	in := func(col string, vals []string) {
		where = append(where, col+" IN ("+strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",")+")")
		for _, v := range vals {
			args = append(args, v)
		}
	}
	if len(f.Type) > 0 {
		in("type", f.Type)
	}
	if len(f.State) > 0 {
		states := make([]string, len(f.State))
		for i, s := range f.State {
			states[i] = string(s)
		}
		in("state", states)
	}
	if f.Size != nil {
		if f.Size.Min != nil {
			where, args = append(where, "size >= ?"), append(args, *f.Size.Min)
		}
		if f.Size.Max != nil {
			where, args = append(where, "size <= ?"), append(args, *f.Size.Max)
		}
	}
	for _, tr := range []struct {
		col string
		r   *TimeRange
	}{{"mtime", f.Mtime}, {"atime", f.Atime}, {"ctime", f.Ctime}} {
		if tr.r == nil {
			continue
		}
		if tr.r.After != nil {
			where, args = append(where, tr.col+" >= ?"), append(args, tr.r.After.UnixNano())
		}
		if tr.r.Before != nil {
			where, args = append(where, tr.col+" < ?"), append(args, tr.r.Before.UnixNano())
		}
	}
	for _, t := range f.Tags {
		where = append(where, "EXISTS (SELECT 1 FROM file_tags t WHERE t.tag = ? AND t.path = files.path)")
		args = append(args, t)
	}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v := f.Metadata[k]; v == "*" {
			where = append(where, "EXISTS (SELECT 1 FROM file_meta m WHERE m.key = ? AND m.path = files.path)")
			args = append(args, k)
		} else {
			where = append(where, "EXISTS (SELECT 1 FROM file_meta m WHERE m.key = ? AND m.value = ? AND m.path = files.path)")
			args = append(args, k, v)
		}
	}
	if q.After != "" {
		where, args = append(where, "path > ?"), append(args, q.After)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	args = append(args, limit+1)
	rows, err := x.db.QueryContext(ctx, `SELECT path, name, type, size, mtime, atime, ctime, state, meta FROM files WHERE `+
		strings.Join(where, " AND ")+` ORDER BY path LIMIT ?`, args...)
	if err != nil {
		return nil, "", fmt.Errorf("search the file index: %w", err)
	}
	defer rows.Close()
	var out []FoundFile
	for rows.Next() {
		var ff FoundFile
		var mtime, atime, ctime int64
		var meta *string
		if err := rows.Scan(&ff.Path, &ff.Name, &ff.Type, &ff.Size, &mtime, &atime, &ctime, &ff.State, &meta); err != nil {
			return nil, "", err
		}
		ff.Mtime, ff.Atime, ff.Ctime = time.Unix(0, mtime).UTC(), time.Unix(0, atime).UTC(), time.Unix(0, ctime).UTC()
		if meta != nil && len(q.Fields) > 0 {
			var m Meta
			if json.Unmarshal([]byte(*meta), &m) == nil {
				ff.Metadata = pickFields(m, q.Fields)
			}
		}
		out = append(out, ff)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Path
	}
	return out, next, nil
}

// pickFields returns the asked-for fields of m.
func pickFields(m Meta, fields []string) map[string]any {
	out := map[string]any{}
	all := slices.Contains(fields, "*")
	for k, v := range m.Fields {
		if all || slices.Contains(fields, k) {
			out[k] = v
		}
	}
	if len(m.Tags) > 0 && (all || slices.Contains(fields, "tags")) {
		out["tags"] = m.Tags
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// FieldsInUse lists the metadata field names of the index, sorted.
func (x *FileIndex) FieldsInUse(ctx context.Context) ([]string, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT DISTINCT key FROM file_meta ORDER BY key`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}
