package cjdoc

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// maxWhereDepth bounds the nesting of $and/$or/$nor/$not/$elemMatch. Real filters
// nest a few levels; the bound keeps a hostile filter from costing deep recursion on
// every document.
const maxWhereDepth = 32

// Filter is a parsed where clause in MongoDB's query language, the language of Eve's
// where parameter. A nil Filter matches every document.
//
// A key is a field name, dotted to reach into nested objects ("profile.name") and
// through arrays: "exposers.name" looks at the name of every exposer, and a numeric
// step ("exposers.0.name") picks one element. A plain value asks for equality; an
// array field matches when the array itself or any element is equal. null matches a
// null or missing field. An object whose keys start with $ applies operators:
//
//	$eq $ne $gt $gte $lt $lte $in $nin $all $exists $regex (+$options "ims") $size $not $elemMatch
//
// and at the top level of a clause $and, $or and $nor take arrays of clauses. Ranges
// compare only values of one type (numbers with numbers, strings with strings), except
// that a stored time.Time compares with an RFC 3339 or RFC 1123 date string. $regex
// uses Go's RE2 syntax and is not anchored. Eve's Python-like syntax (name=="x") is not
// accepted.
type Filter struct {
	root cond
}

// Match reports whether doc satisfies the filter.
func (f *Filter) Match(doc map[string]any) bool {
	if f == nil || f.root == nil {
		return true
	}
	return f.root.match(doc)
}

// ParseWhere parses a where parameter: a JSON object as described at Filter. An empty
// object yields a filter matching everything. Errors are *QueryError.
func ParseWhere(s string) (*Filter, error) {
	v, err := decodeJSONParam(ParamWhere, s)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, whereErr("must be a JSON object")
	}
	c, err := compileClause(m, 0)
	if err != nil {
		return nil, err
	}
	return &Filter{root: c}, nil
}

func whereErr(format string, args ...any) error {
	return &QueryError{Param: ParamWhere, Reason: fmt.Sprintf(format, args...)}
}

// cond is a condition on a whole document (or on an array element, for $elemMatch).
type cond interface {
	match(doc any) bool
}

type allOf []cond

func (c allOf) match(doc any) bool {
	for _, sub := range c {
		if !sub.match(doc) {
			return false
		}
	}
	return true
}

type anyOf []cond

func (c anyOf) match(doc any) bool {
	for _, sub := range c {
		if sub.match(doc) {
			return true
		}
	}
	return false
}

type noneOf []cond

func (c noneOf) match(doc any) bool { return !anyOf(c).match(doc) }

// fieldCond holds when every operator holds on the values found at path.
type fieldCond struct {
	path []string
	ops  []op
}

func (c fieldCond) match(doc any) bool {
	return allOps(c.ops, lookup(doc, c.path))
}

// op tests the values a path leads to; see lookup for what they are.
type op interface {
	test(vals []any) bool
}

func allOps(ops []op, vals []any) bool {
	for _, o := range ops {
		if !o.test(vals) {
			return false
		}
	}
	return true
}

// anyValue reports whether pred holds for one of vals or, as MongoDB does for arrays,
// for an element of one of them.
func anyValue(vals []any, pred func(any) bool) bool {
	for _, v := range vals {
		if pred(v) {
			return true
		}
		if l, ok := asList(v); ok {
			for _, e := range l {
				if pred(e) {
					return true
				}
			}
		}
	}
	return false
}

type eqOp struct{ want any }

func (o eqOp) test(vals []any) bool {
	return anyValue(vals, func(v any) bool { return valuesEqual(v, o.want) })
}

// notOp negates the conjunction of its operators; $ne and $nin are built on it so
// that, as in MongoDB, they also match documents lacking the field.
type notOp struct{ ops []op }

func (o notOp) test(vals []any) bool { return !allOps(o.ops, vals) }

type cmpOp struct {
	bound  any
	accept func(c int) bool
}

func (o cmpOp) test(vals []any) bool {
	return anyValue(vals, func(v any) bool {
		c, ok := compareForQuery(v, o.bound)
		return ok && o.accept(c)
	})
}

type inOp struct{ set []any }

func (o inOp) test(vals []any) bool {
	return anyValue(vals, func(v any) bool {
		for _, w := range o.set {
			if valuesEqual(v, w) {
				return true
			}
		}
		return false
	})
}

type allOp struct{ set []any }

func (o allOp) test(vals []any) bool {
	if len(o.set) == 0 {
		return false // as in MongoDB: {$all: []} matches nothing
	}
	for _, w := range o.set {
		if !(eqOp{w}).test(vals) {
			return false
		}
	}
	return true
}

type existsOp struct{ want bool }

func (o existsOp) test(vals []any) bool {
	found := false
	for _, v := range vals {
		if kindOf(v) != kindMissing {
			found = true
			break
		}
	}
	return found == o.want
}

type regexOp struct{ re *regexp.Regexp }

func (o regexOp) test(vals []any) bool {
	return anyValue(vals, func(v any) bool {
		s, ok := asString(v)
		return ok && o.re.MatchString(s)
	})
}

type sizeOp struct{ n int }

func (o sizeOp) test(vals []any) bool {
	for _, v := range vals {
		if l, ok := asList(v); ok && len(l) == o.n {
			return true
		}
	}
	return false
}

// elemMatchOp holds when one element of an array satisfies everything at once, which
// dotted keys cannot say: {"exposers": {"$elemMatch": {"name": "e1", "type": "nfs"}}}.
// Either clause (for arrays of objects) or ops (for arrays of scalars) is set.
type elemMatchOp struct {
	clause cond
	ops    []op
}

func (o elemMatchOp) test(vals []any) bool {
	for _, v := range vals {
		l, ok := asList(v)
		if !ok {
			continue
		}
		for _, e := range l {
			if o.clause != nil {
				if kindOf(e) == kindObject && o.clause.match(e) {
					return true
				}
			} else if allOps(o.ops, []any{e}) {
				return true
			}
		}
	}
	return false
}

// compileClause compiles a query object: the conjunction of its keys.
func compileClause(m map[string]any, depth int) (cond, error) {
	if depth > maxWhereDepth {
		return nil, whereErr("nests more than %d levels", maxWhereDepth)
	}
	conds := make(allOf, 0, len(m))
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch {
		case k == "$and" || k == "$or" || k == "$nor":
			subs, err := compileClauses(k, v, depth)
			if err != nil {
				return nil, err
			}
			switch k {
			case "$and":
				conds = append(conds, allOf(subs))
			case "$or":
				conds = append(conds, anyOf(subs))
			default:
				conds = append(conds, noneOf(subs))
			}
		case strings.HasPrefix(k, "$"):
			return nil, whereErr("unknown operator %s at the top of a clause", k)
		default:
			path, err := splitPath(k)
			if err != nil {
				return nil, whereErr("%v", err)
			}
			ops, err := compileValue(k, v, depth+1)
			if err != nil {
				return nil, err
			}
			conds = append(conds, fieldCond{path: path, ops: ops})
		}
	}
	if len(conds) == 1 {
		return conds[0], nil
	}
	return conds, nil
}

func compileClauses(name string, v any, depth int) ([]cond, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, whereErr("%s needs a non-empty array of objects", name)
	}
	subs := make([]cond, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, whereErr("%s needs a non-empty array of objects", name)
		}
		c, err := compileClause(m, depth+1)
		if err != nil {
			return nil, err
		}
		subs = append(subs, c)
	}
	return subs, nil
}

// isOperatorObject reports whether v is an object of operators rather than a value to
// compare with; an object mixing the two is an error, as in MongoDB.
func isOperatorObject(field string, v any) (map[string]any, bool, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, false, nil
	}
	ops := 0
	for k := range m {
		if strings.HasPrefix(k, "$") {
			ops++
		}
	}
	switch ops {
	case 0:
		return nil, false, nil
	case len(m):
		return m, true, nil
	}
	return nil, false, whereErr("%s: cannot mix operators and field names in one object", field)
}

// compileValue compiles what a field key maps to: operators or a value for equality.
func compileValue(field string, v any, depth int) ([]op, error) {
	m, isOps, err := isOperatorObject(field, v)
	if err != nil {
		return nil, err
	}
	if !isOps {
		return []op{eqOp{v}}, nil
	}
	return compileOps(field, m, depth)
}

func compileOps(field string, m map[string]any, depth int) ([]op, error) {
	if depth > maxWhereDepth {
		return nil, whereErr("nests more than %d levels", maxWhereDepth)
	}
	bad := func(format string, args ...any) error {
		return whereErr("%s: "+format, append([]any{field}, args...)...)
	}
	ops := make([]op, 0, len(m))
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "$eq":
			ops = append(ops, eqOp{v})
		case "$ne":
			ops = append(ops, notOp{[]op{eqOp{v}}})
		case "$gt":
			ops = append(ops, cmpOp{v, func(c int) bool { return c > 0 }})
		case "$gte":
			ops = append(ops, cmpOp{v, func(c int) bool { return c >= 0 }})
		case "$lt":
			ops = append(ops, cmpOp{v, func(c int) bool { return c < 0 }})
		case "$lte":
			ops = append(ops, cmpOp{v, func(c int) bool { return c <= 0 }})
		case "$in", "$nin", "$all":
			set, ok := v.([]any)
			if !ok {
				return nil, bad("%s needs an array", k)
			}
			switch k {
			case "$in":
				ops = append(ops, inOp{set})
			case "$nin":
				ops = append(ops, notOp{[]op{inOp{set}}})
			default:
				ops = append(ops, allOp{set})
			}
		case "$exists":
			switch x := v.(type) {
			case bool:
				ops = append(ops, existsOp{x})
			case int64:
				ops = append(ops, existsOp{x != 0})
			case float64:
				ops = append(ops, existsOp{x != 0})
			default:
				return nil, bad("$exists needs true or false")
			}
		case "$regex":
			options, _ := m["$options"].(string)
			re, err := compileQueryRegex(v, options, m["$options"])
			if err != nil {
				return nil, bad("%v", err)
			}
			ops = append(ops, regexOp{re})
		case "$options":
			if _, ok := m["$regex"]; !ok {
				return nil, bad("$options needs $regex")
			}
		case "$size":
			n, ok := nonNegativeInt(v)
			if !ok {
				return nil, bad("$size needs a non-negative integer")
			}
			ops = append(ops, sizeOp{n})
		case "$not":
			sub, isOps, err := isOperatorObject(field, v)
			if err != nil {
				return nil, err
			}
			if !isOps {
				return nil, bad("$not needs an object of operators")
			}
			subOps, err := compileOps(field, sub, depth+1)
			if err != nil {
				return nil, err
			}
			ops = append(ops, notOp{subOps})
		case "$elemMatch":
			sub, ok := v.(map[string]any)
			if !ok {
				return nil, bad("$elemMatch needs an object")
			}
			o, err := compileElemMatch(field, sub, depth+1)
			if err != nil {
				return nil, err
			}
			ops = append(ops, o)
		default:
			return nil, bad("unknown operator %s", k)
		}
	}
	return ops, nil
}

// compileElemMatch takes operators for arrays of scalars ({"$gte": 3}) and a clause
// for arrays of objects ({"name": "e1"}); $and, $or and $nor make it a clause.
func compileElemMatch(field string, m map[string]any, depth int) (op, error) {
	_, isOps, err := isOperatorObject(field, m)
	if err != nil {
		return nil, err
	}
	for k := range m {
		if k == "$and" || k == "$or" || k == "$nor" {
			isOps = false
		}
	}
	if isOps {
		ops, err := compileOps(field, m, depth)
		if err != nil {
			return nil, err
		}
		return elemMatchOp{ops: ops}, nil
	}
	c, err := compileClause(m, depth)
	if err != nil {
		return nil, err
	}
	return elemMatchOp{clause: c}, nil
}

func compileQueryRegex(pattern any, options string, rawOptions any) (*regexp.Regexp, error) {
	p, ok := pattern.(string)
	if !ok {
		return nil, fmt.Errorf("$regex needs a string")
	}
	if _, isString := rawOptions.(string); rawOptions != nil && !isString {
		return nil, fmt.Errorf("$options needs a string")
	}
	for _, c := range options {
		if !strings.ContainsRune("ims", c) {
			return nil, fmt.Errorf("$options supports only i, m and s, not %q", c)
		}
	}
	if options != "" {
		p = "(?" + options + ")" + translatePythonRegex(p)
	} else {
		p = translatePythonRegex(p)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("bad $regex: %v", err)
	}
	return re, nil
}

func nonNegativeInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		if x >= 0 && x <= math.MaxInt32 {
			return int(x), true
		}
	case float64:
		if x >= 0 && x <= math.MaxInt32 && x == math.Trunc(x) {
			return int(x), true
		}
	}
	return 0, false
}

// decodeJSONParam decodes a JSON query parameter, turning its numbers into int64 or
// float64 as normalize does.
func decodeJSONParam(param, s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &QueryError{Param: param, Reason: "not valid JSON: " + err.Error()}
	}
	if strings.TrimLeft(s[dec.InputOffset():], " \t\r\n") != "" {
		return nil, &QueryError{Param: param, Reason: "not valid JSON: data after the value"}
	}
	v, ok := normalize(v)
	if !ok {
		return nil, &QueryError{Param: param, Reason: "a number is out of range"}
	}
	return v, nil
}
