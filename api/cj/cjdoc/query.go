package cjdoc

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Names of the query parameters ParseQuery reads.
const (
	ParamWhere      = "where"
	ParamProjection = "projection"
	ParamSort       = "sort"
	ParamMaxResults = "max_results"
	ParamPage       = "page"
)

// DefaultMaxResults is the page size when neither the request nor Defaults names one;
// it is the value in the spec's sample.
const DefaultMaxResults = 25

// DefaultMaxResultsCap is the largest page size a request may ask for when Defaults
// sets none. Larger requests are cut down to it, as Eve does, rather than refused.
const DefaultMaxResultsCap = 100

// Defaults are a resource's paging settings; the server tunes them to the cost of
// reading an item. Zero fields take the package defaults.
type Defaults struct {
	// MaxResults is the page size when the request gives none.
	MaxResults int
	// Cap is the largest page size; a larger max_results is cut down to it.
	Cap int
}

// Query is a parsed Eve-style list request.
type Query struct {
	// Where selects documents; nil selects all.
	Where *Filter
	// Projection limits the fields returned; nil returns all.
	Projection *Projection
	// Sort orders the matches; empty keeps the input order.
	Sort []SortKey
	// MaxResults is the page size; 0 or less means one page with every match.
	MaxResults int
	// Page is the 1-based page number; 0 or less means 1.
	Page int
	// Params are the request's parameters as received, which PageLinks repeats in
	// every link so that filters and unrelated parameters survive paging.
	Params url.Values
}

// SortKey is one sort criterion. Field may be dotted (profile.name).
type SortKey struct {
	Field      string
	Descending bool
}

// QueryError is a malformed query parameter; the server answers 400 with CJError.
type QueryError struct {
	// Param is the offending parameter, e.g. "where".
	Param string
	// Reason says what is wrong, for the client.
	Reason string
}

// Error implements error.
func (e *QueryError) Error() string {
	return fmt.Sprintf("invalid %s parameter: %s", e.Param, e.Reason)
}

// CJError renders the error as a C+J error object naming the parameter.
func (e *QueryError) CJError() Error {
	return Error{
		Title:   "Invalid query",
		Code:    CodeInvalidQuery,
		Message: e.Error(),
		Fields:  []FieldError{{Name: e.Param, Message: e.Reason}},
	}
}

// ParseQuery reads the where, projection, sort, max_results and page parameters
// (see ParseWhere, ParseProjection and ParseSort for their forms) and keeps a copy of
// all parameters in Query.Params. An empty parameter counts as absent; other
// parameters are ignored. Each parameter may appear once. max_results and page are
// integers of at least 1; max_results above the cap is cut down to it. Errors are
// *QueryError.
func ParseQuery(values url.Values, d Defaults) (Query, error) {
	capSize := d.Cap
	if capSize <= 0 {
		capSize = DefaultMaxResultsCap
	}
	size := d.MaxResults
	if size <= 0 {
		size = DefaultMaxResults
	}
	q := Query{MaxResults: min(size, capSize), Page: 1, Params: cloneValues(values)}

	var err error
	get := func(name string) (string, bool) {
		if err != nil {
			return "", false
		}
		vs := values[name]
		if len(vs) > 1 {
			err = &QueryError{Param: name, Reason: "given more than once"}
			return "", false
		}
		if len(vs) == 0 || vs[0] == "" {
			return "", false
		}
		return vs[0], true
	}
	if s, ok := get(ParamWhere); ok {
		q.Where, err = ParseWhere(s)
	}
	if s, ok := get(ParamProjection); ok {
		q.Projection, err = ParseProjection(s)
	}
	if s, ok := get(ParamSort); ok {
		q.Sort, err = ParseSort(s)
	}
	if s, ok := get(ParamMaxResults); ok {
		var n int
		n, err = positiveInt(ParamMaxResults, s)
		q.MaxResults = min(n, capSize)
	}
	if s, ok := get(ParamPage); ok {
		q.Page, err = positiveInt(ParamPage, s)
	}
	if err != nil {
		return Query{}, err
	}
	return q, nil
}

func positiveInt(param, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, &QueryError{Param: param, Reason: "must be an integer of at least 1"}
	}
	return n, nil
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// ParseSort parses a sort parameter in either of two forms:
//
//	name,-profile.name           comma-separated fields, "-" for descending
//	[("name", 1), ("profile.name", -1)]   Eve's Python-literal form (1 or -1)
//
// In the second form, square brackets may replace the parentheses, so the JSON
// [["name", -1]] is read too. A field may appear only once. Errors are *QueryError.
func ParseSort(s string) ([]SortKey, error) {
	var keys []SortKey
	var err error
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		keys, err = parseEveSort(s)
	} else {
		keys, err = parseCommaSort(s)
	}
	if err != nil {
		return nil, &QueryError{Param: ParamSort, Reason: err.Error()}
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if _, err := splitPath(k.Field); err != nil {
			return nil, &QueryError{Param: ParamSort, Reason: err.Error()}
		}
		if seen[k.Field] {
			return nil, &QueryError{Param: ParamSort, Reason: fmt.Sprintf("field %q given more than once", k.Field)}
		}
		seen[k.Field] = true
	}
	return keys, nil
}

func parseCommaSort(s string) ([]SortKey, error) {
	var keys []SortKey
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		k := SortKey{Field: part}
		if rest, ok := strings.CutPrefix(part, "-"); ok {
			k = SortKey{Field: strings.TrimSpace(rest), Descending: true}
		}
		if k.Field == "" {
			return nil, fmt.Errorf("empty field name in %q", s)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// parseEveSort reads [("name", 1), ("other", -1)]: a list of (field, direction)
// pairs, strings in single or double quotes without escapes, Python's trailing commas
// allowed.
func parseEveSort(s string) ([]SortKey, error) {
	sc := scanner{s: s}
	bad := func(what string) error {
		return fmt.Errorf("expected %s at offset %d in %q", what, sc.i, s)
	}
	sc.space()
	if !sc.eat('[') {
		return nil, bad("[")
	}
	var keys []SortKey
	for {
		sc.space()
		if sc.eat(']') {
			break
		}
		closer := byte(')')
		switch {
		case sc.eat('('):
		case sc.eat('['):
			closer = ']'
		default:
			return nil, bad("( or ]")
		}
		sc.space()
		field, ok := sc.quoted()
		if !ok {
			return nil, bad("a quoted field name")
		}
		sc.space()
		if !sc.eat(',') {
			return nil, bad(",")
		}
		sc.space()
		desc, ok := sc.direction()
		if !ok {
			return nil, bad("1 or -1")
		}
		sc.space()
		sc.eat(',')
		sc.space()
		if !sc.eat(closer) {
			return nil, bad(string(closer))
		}
		keys = append(keys, SortKey{Field: field, Descending: desc})
		sc.space()
		if sc.eat(']') {
			break
		}
		if !sc.eat(',') {
			return nil, bad(", or ]")
		}
	}
	sc.space()
	if sc.i != len(s) {
		return nil, bad("the end")
	}
	return keys, nil
}

type scanner struct {
	s string
	i int
}

func (sc *scanner) space() {
	for sc.i < len(sc.s) && strings.IndexByte(" \t\r\n", sc.s[sc.i]) >= 0 {
		sc.i++
	}
}

func (sc *scanner) eat(c byte) bool {
	if sc.i < len(sc.s) && sc.s[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

func (sc *scanner) quoted() (string, bool) {
	if sc.i >= len(sc.s) || (sc.s[sc.i] != '"' && sc.s[sc.i] != '\'') {
		return "", false
	}
	quote := sc.s[sc.i]
	end := strings.IndexByte(sc.s[sc.i+1:], quote)
	if end < 0 {
		return "", false
	}
	text := sc.s[sc.i+1 : sc.i+1+end]
	if strings.ContainsRune(text, '\\') {
		return "", false
	}
	sc.i += end + 2
	return text, true
}

// direction reads 1, +1 or -1 and reports whether it is descending.
func (sc *scanner) direction() (desc, ok bool) {
	switch {
	case strings.HasPrefix(sc.s[sc.i:], "-1"):
		sc.i += 2
		desc = true
	case strings.HasPrefix(sc.s[sc.i:], "+1"):
		sc.i += 2
	case strings.HasPrefix(sc.s[sc.i:], "1"):
		sc.i++
	default:
		return false, false
	}
	// Refuse 10, -12 and the like rather than reading their first digit.
	if sc.i < len(sc.s) && sc.s[sc.i] >= '0' && sc.s[sc.i] <= '9' {
		return false, false
	}
	return desc, true
}

// alwaysKept are the top-level fields every projection keeps, so that each returned
// item can still be addressed and updated.
var alwaysKept = []string{"id", "_etag", "href"}

// Projection limits the fields of returned documents. It either includes only the
// named fields or excludes the named fields; id, _etag and href are always kept.
type Projection struct {
	include bool
	root    projNode
}

type projNode struct {
	leaf bool
	kids map[string]*projNode
}

// ParseProjection parses a projection parameter: a JSON object mapping field names,
// which may be dotted, to 1 (or true) to include only those fields, or to 0 (or
// false) to return everything else. Mixing 1 and 0 is an error, except on id, _etag
// and href, which are always kept and so ignored. An empty object, or one naming
// only kept fields with 0, yields nil: no projection. Errors are *QueryError.
func ParseProjection(s string) (*Projection, error) {
	bad := func(format string, args ...any) error {
		return &QueryError{Param: ParamProjection, Reason: fmt.Sprintf(format, args...)}
	}
	v, err := decodeJSONParam(ParamProjection, s)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, bad("must be a JSON object")
	}
	var p Projection
	includes, excludes, keptIncluded := 0, 0, false
	for _, name := range sortedKeys(m) {
		var include bool
		switch x := m[name].(type) {
		case bool:
			include = x
		case int64:
			if x != 0 && x != 1 {
				return nil, bad("%s: must be 1 or 0", name)
			}
			include = x == 1
		case float64:
			if x != 0 && x != 1 {
				return nil, bad("%s: must be 1 or 0", name)
			}
			include = x == 1
		default:
			return nil, bad("%s: must be 1 or 0", name)
		}
		path, err := splitPath(name)
		if err != nil {
			return nil, bad("%v", err)
		}
		if len(path) == 1 && slices.Contains(alwaysKept, name) {
			keptIncluded = keptIncluded || include
			continue
		}
		if include {
			includes++
		} else {
			excludes++
		}
		if err := p.root.add(path); err != nil {
			return nil, bad("%v", err)
		}
	}
	switch {
	case includes > 0 && excludes > 0:
		return nil, bad("cannot mix inclusion (1) and exclusion (0)")
	case excludes > 0:
		return &p, nil
	case includes > 0 || keptIncluded:
		// {"id": 1} alone asks for nothing but the fields always kept.
		p.include = true
		return &p, nil
	}
	return nil, nil
}

// add inserts a path, refusing one that overlaps a path already there (a and a.b),
// since which of the two should win is not obvious.
func (n *projNode) add(path []string) error {
	for i, step := range path {
		if n.leaf {
			return fmt.Errorf("%s overlaps %s", strings.Join(path, "."), strings.Join(path[:i], "."))
		}
		if n.kids == nil {
			n.kids = map[string]*projNode{}
		}
		kid, ok := n.kids[step]
		if !ok {
			kid = &projNode{}
			n.kids[step] = kid
		}
		n = kid
	}
	if n.leaf || len(n.kids) > 0 {
		return fmt.Errorf("%s overlaps another field", strings.Join(path, "."))
	}
	n.leaf = true
	return nil
}

// Apply returns the projected copy of doc; doc itself is not changed. A nil
// projection returns doc as it is.
func (p *Projection) Apply(doc map[string]any) map[string]any {
	if p == nil {
		return doc
	}
	if p.include {
		out := includeFields(doc, &p.root)
		for _, name := range alwaysKept {
			if v, ok := doc[name]; ok {
				out[name] = v
			}
		}
		return out
	}
	return excludeFields(doc, &p.root)
}

// includeFields keeps the fields under n. As in MongoDB, a dotted path reaching into
// an array keeps that part of each object element and drops the other elements, and
// one reaching into a scalar drops it.
func includeFields(doc map[string]any, n *projNode) map[string]any {
	out := make(map[string]any, len(n.kids))
	for name, kid := range n.kids {
		v, ok := doc[name]
		if !ok {
			continue
		}
		if kid.leaf {
			out[name] = v
			continue
		}
		if m, ok := asMap(v); ok {
			out[name] = includeFields(m, kid)
		} else if l, ok := asList(v); ok {
			kept := make([]any, 0, len(l))
			for _, e := range l {
				if m, ok := asMap(e); ok {
					kept = append(kept, includeFields(m, kid))
				}
			}
			out[name] = kept
		}
	}
	return out
}

// excludeFields drops the fields under n, reaching into objects and into the object
// elements of arrays.
func excludeFields(doc map[string]any, n *projNode) map[string]any {
	out := make(map[string]any, len(doc))
	for name, v := range doc {
		kid, ok := n.kids[name]
		switch {
		case !ok:
			out[name] = v
		case kid.leaf:
			// dropped
		default:
			if m, ok := asMap(v); ok {
				out[name] = excludeFields(m, kid)
			} else if l, ok := asList(v); ok {
				kept := make([]any, len(l))
				for i, e := range l {
					if m, ok := asMap(e); ok {
						e = excludeFields(m, kid)
					}
					kept[i] = e
				}
				out[name] = kept
			} else {
				out[name] = v
			}
		}
	}
	return out
}
