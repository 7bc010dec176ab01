package cjdoc

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// missingValue stands for a path that leads nowhere in a document. It is not null:
// {"a": null} has a, {} does not, and $exists tells them apart.
type missingValue struct{}

// kind is the type class of a value. Its order is the order of classes when values
// of different classes are sorted (after MongoDB's BSON order): missing first.
type kind int

const (
	kindMissing kind = iota
	kindNull
	kindNumber
	kindString
	kindObject
	kindArray
	kindBool
	kindTime
	kindOther
)

func kindOf(v any) kind {
	switch x := v.(type) {
	case missingValue:
		return kindMissing
	case nil:
		return kindNull
	case bool:
		return kindBool
	case string:
		return kindString
	case json.Number:
		if _, ok := asNumber(x); ok {
			return kindNumber
		}
		return kindString
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr, float32, float64:
		return kindNumber
	case time.Time:
		return kindTime
	case map[string]any:
		return kindObject
	case []any:
		return kindArray
	}
	// Named types and typed containers ([]string, map[string]int) built by Go code
	// rather than decoded from JSON.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		return kindBool
	case reflect.String:
		return kindString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return kindNumber
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			return kindObject
		}
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() != reflect.Uint8 {
			return kindArray
		}
	}
	return kindOther
}

// number holds a numeric value exactly: integers as int64, everything else as float64.
type number struct {
	isInt bool
	i     int64
	f     float64
}

func asNumber(v any) (number, bool) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return number{isInt: true, i: i}, true
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !isRangeErr(err) {
			return number{}, false
		}
		return number{f: f}, true
	case float64:
		return number{f: x}, true
	case float32:
		return number{f: float64(x)}, true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return number{isInt: true, i: rv.Int()}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u <= math.MaxInt64 {
			return number{isInt: true, i: int64(u)}, true
		}
		return number{f: float64(u)}, true
	case reflect.Float32, reflect.Float64:
		return number{f: rv.Float()}, true
	}
	return number{}, false
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// compareNumbers orders numbers by value whatever their Go type. NaN sorts below every
// other number so that the order stays total.
func compareNumbers(a, b number) int {
	switch {
	case a.isInt && b.isInt:
		return cmp.Compare(a.i, b.i)
	case a.isInt:
		return -compareFloatInt(b.f, a.i)
	case b.isInt:
		return compareFloatInt(a.f, b.i)
	}
	return cmp.Compare(a.f, b.f) // cmp.Compare puts NaN first
}

// compareFloatInt compares without rounding i to float64, which would make distinct
// large integers look equal to a float.
func compareFloatInt(f float64, i int64) int {
	switch {
	case math.IsNaN(f):
		return -1
	case f >= -(1<<63) && f < 1<<63 && f == math.Trunc(f):
		return cmp.Compare(int64(f), i)
	}
	// f is fractional, and then |f| < 2^53 where float64(i) keeps its side of f, or
	// f lies outside the int64 range altogether.
	return cmp.Compare(f, float64(i))
}

func asString(v any) (string, bool) {
	if s, ok := v.(string); ok {
		return s, true
	}
	if n, ok := v.(json.Number); ok && kindOf(n) == kindString {
		return string(n), true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.String {
		return rv.String(), true
	}
	return "", false
}

func asBool(v any) bool {
	if b, ok := v.(bool); ok {
		return b
	}
	return reflect.ValueOf(v).Bool()
}

// asMap returns v as map[string]any, converting typed maps built by Go code.
func asMap(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	if kindOf(v) != kindObject {
		return nil, false
	}
	rv := reflect.ValueOf(v)
	m := make(map[string]any, rv.Len())
	iter := rv.MapRange()
	for iter.Next() {
		m[iter.Key().String()] = iter.Value().Interface()
	}
	return m, true
}

// asList returns v as []any, converting typed slices built by Go code.
func asList(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	if kindOf(v) != kindArray {
		return nil, false
	}
	rv := reflect.ValueOf(v)
	l := make([]any, rv.Len())
	for i := range l {
		l[i] = rv.Index(i).Interface()
	}
	return l, true
}

// compareValues is the total order used for sorting: values of different classes
// compare by class (see kind), values of one class by content.
func compareValues(a, b any) int {
	ka, kb := kindOf(a), kindOf(b)
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	return compareSameKind(ka, a, b)
}

func compareSameKind(k kind, a, b any) int {
	switch k {
	case kindNumber:
		na, _ := asNumber(a)
		nb, _ := asNumber(b)
		return compareNumbers(na, nb)
	case kindString:
		sa, _ := asString(a)
		sb, _ := asString(b)
		return strings.Compare(sa, sb)
	case kindBool:
		ba, bb := asBool(a), asBool(b)
		switch {
		case ba == bb:
			return 0
		case bb:
			return -1
		}
		return 1
	case kindTime:
		return a.(time.Time).Compare(b.(time.Time))
	case kindObject:
		ma, _ := asMap(a)
		mb, _ := asMap(b)
		return compareMaps(ma, mb)
	case kindArray:
		la, _ := asList(a)
		lb, _ := asList(b)
		for i := range min(len(la), len(lb)) {
			if c := compareValues(la[i], lb[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(la), len(lb))
	case kindOther:
		// Types a document should not hold; ordering them by type name keeps the
		// sort deterministic without printing values that might be huge or cyclic.
		return strings.Compare(fmt.Sprintf("%T", a), fmt.Sprintf("%T", b))
	}
	return 0 // missing and null are each a single value
}

// compareMaps orders objects by their sorted keys and then the values under them.
func compareMaps(a, b map[string]any) int {
	ka, kb := sortedKeys(a), sortedKeys(b)
	for i := range min(len(ka), len(kb)) {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := compareValues(a[ka[i]], b[kb[i]]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ka), len(kb))
}

// valuesEqual is equality for where clauses: numbers by value, objects regardless of
// key order, and a time.Time equal to a string that parses as the same instant.
func valuesEqual(a, b any) bool {
	c, ok := compareForQuery(a, b)
	return ok && c == 0
}

// compareForQuery compares a and b when they are comparable in a where clause, that
// is, when they have the same class (MongoDB's type bracketing). A time.Time and a
// string holding an RFC 3339 or RFC 1123 date are compared as times. Missing compares
// as null, as in MongoDB, where {a: null} also matches documents without a.
func compareForQuery(a, b any) (int, bool) {
	ka, kb := kindOf(a), kindOf(b)
	if ka == kindMissing {
		ka = kindNull
	}
	if kb == kindMissing {
		kb = kindNull
	}
	if ka == kindTime && kb == kindString {
		t, ok := parseTime(b)
		return a.(time.Time).Compare(t), ok
	}
	if ka == kindString && kb == kindTime {
		t, ok := parseTime(a)
		return t.Compare(b.(time.Time)), ok
	}
	if ka != kb {
		return 0, false
	}
	return compareSameKind(ka, a, b), true
}

// timeLayouts are the forms dates arrive in from clients: RFC 3339 from JSON APIs and
// RFC 1123 with GMT, the form Eve uses in where clauses.
var timeLayouts = []string{time.RFC3339Nano, time.RFC1123}

func parseTime(v any) (time.Time, bool) {
	s, _ := asString(v)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// lookup returns the values found at path inside v. As in MongoDB, a step into an
// array applies to each object element (and to the element at a numeric step), so
// "exposers.name" yields the name of every exposer. A step that finds nothing yields
// missingValue, so the result is never empty.
func lookup(v any, path []string) []any {
	if len(path) == 0 {
		return []any{v}
	}
	if m, ok := asMap(v); ok {
		child, ok := m[path[0]]
		if !ok {
			return []any{missingValue{}}
		}
		return lookup(child, path[1:])
	}
	l, ok := asList(v)
	if !ok {
		return []any{missingValue{}}
	}
	var out []any
	if i, ok := arrayIndex(path[0]); ok && i < len(l) {
		out = append(out, lookup(l[i], path[1:])...)
	}
	for _, e := range l {
		if kindOf(e) == kindObject {
			out = append(out, lookup(e, path)...)
		}
	}
	if len(out) == 0 {
		return []any{missingValue{}}
	}
	return out
}

// arrayIndex reads a path step of decimal digits only, as MongoDB does.
func arrayIndex(step string) (int, bool) {
	if step == "" || len(step) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(step) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// splitPath checks and splits a dotted field name such as "profile.name".
func splitPath(name string) ([]string, error) {
	if name == "" {
		return nil, fmt.Errorf("empty field name")
	}
	parts := strings.Split(name, ".")
	for _, p := range parts {
		switch {
		case p == "":
			return nil, fmt.Errorf("field name %q has an empty part", name)
		case p[0] == '$':
			return nil, fmt.Errorf("field name %q has a part starting with $", name)
		}
	}
	return parts, nil
}

// normalize returns a JSON-shaped copy of v: map[string]any, []any, string, bool,
// nil, and numbers as int64 when they are integers that fit and float64 otherwise.
// It converts json.Number and the typed values Go code may build ([]string, int,
// named strings), so results and defaults have one representation and are never
// shared. It reports false for a number JSON cannot carry (1e999, NaN, ±Inf).
func normalize(v any) (any, bool) {
	switch kindOf(v) {
	case kindNumber:
		n, _ := asNumber(v)
		switch {
		case n.isInt:
			return n.i, true
		case math.IsInf(n.f, 0) || math.IsNaN(n.f):
			return nil, false
		}
		return n.f, true
	case kindString:
		s, _ := asString(v)
		return s, true
	case kindBool:
		return asBool(v), true
	case kindObject:
		m, _ := asMap(v)
		out := make(map[string]any, len(m))
		for k, e := range m {
			n, ok := normalize(e)
			if !ok {
				return nil, false
			}
			out[k] = n
		}
		return out, true
	case kindArray:
		l, _ := asList(v)
		out := make([]any, len(l))
		for i, e := range l {
			n, ok := normalize(e)
			if !ok {
				return nil, false
			}
			out[i] = n
		}
		return out, true
	}
	return v, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
