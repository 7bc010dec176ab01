package cjdoc

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseWhereMatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		where string
		want  []int
	}{
		{"empty object matches all", `{}`, []int{1, 2, 3, 4}},
		{"equality", `{"name":"s1"}`, []int{1}},
		{"equality int vs float", `{"size":10.0}`, []int{1}},
		{"equality json.Number", `{"size":7}`, []int{3}},
		{"equality float id", `{"id":2}`, []int{2}},
		{"dotted into object", `{"profile.name":"gold"}`, []int{1, 3}},
		{"dotted into array of objects", `{"exposers.name":"e3"}`, []int{2}},
		{"dotted into array any element", `{"exposers.type":"nfs"}`, []int{1, 2}},
		{"numeric step picks element", `{"exposers.0.name":"e2"}`, []int{2}},
		{"numeric step out of range", `{"exposers.5.name":"e2"}`, nil},
		{"array contains scalar", `{"templates":4}`, []int{1, 2}},
		{"array equals whole array", `{"templates":[4]}`, []int{2}},
		{"array equals whole array order matters", `{"templates":[4,3]}`, nil},
		{"object equality ignores key order", `{"exposers":{"type":"nfs","name":"e1"}}`, []int{1}},
		{"null matches null and missing", `{"comment":null}`, []int{2, 3, 4}},
		{"two keys are and", `{"profile.name":"gold","status":"ACTIVE"}`, []int{1}},
		{"dotted keys may hit different elements", `{"exposers.name":"e2","exposers.type":"nfs"}`, []int{2}},
		{"$eq", `{"size":{"$eq":7}}`, []int{3}},
		{"$ne", `{"name":{"$ne":"s1"}}`, []int{2, 3, 4}},
		{"$ne matches missing", `{"profile.name":{"$ne":"gold"}}`, []int{2, 4}},
		{"$ne on array excludes any element", `{"templates":{"$ne":4}}`, []int{3, 4}},
		{"$gt numbers only", `{"size":{"$gt":5}}`, []int{1, 3}},
		{"$gte", `{"size":{"$gte":7}}`, []int{1, 3}},
		{"$lt", `{"size":{"$lt":7}}`, []int{2}},
		{"$lte", `{"size":{"$lte":2.5}}`, []int{2}},
		{"$gt strings", `{"name":{"$gt":"s2"}}`, []int{3, 4}},
		{"$gt and $lt range", `{"size":{"$gt":2.5,"$lt":10}}`, []int{3}},
		{"$gt on array elements", `{"templates":{"$gt":3}}`, []int{1, 2}},
		{"$gte null matches missing", `{"comment":{"$gte":null}}`, []int{2, 3, 4}},
		{"$gt time vs RFC 3339", `{"_created":{"$gt":"2024-03-01T10:30:00Z"}}`, []int{2}},
		{"$lte time vs RFC 1123", `{"_created":{"$lte":"Fri, 01 Mar 2024 10:00:00 GMT"}}`, []int{1}},
		{"$eq time vs string", `{"_created":"2024-03-01T10:00:00Z"}`, []int{1}},
		{"$in", `{"name":{"$in":["s1","s3"]}}`, []int{1, 3}},
		{"$in on array", `{"templates":{"$in":[3,9]}}`, []int{1}},
		{"$in with null", `{"comment":{"$in":[null,"first"]}}`, []int{1, 2, 3, 4}},
		{"$in empty", `{"name":{"$in":[]}}`, nil},
		{"$nin", `{"name":{"$nin":["s1","s3"]}}`, []int{2, 4}},
		{"$nin on dotted array", `{"exposers.type":{"$nin":["cifs"]}}`, []int{1, 3, 4}},
		{"$all", `{"templates":{"$all":[3,4]}}`, []int{1}},
		{"$all empty matches nothing", `{"templates":{"$all":[]}}`, nil},
		{"$exists true", `{"comment":{"$exists":true}}`, []int{1, 3}},
		{"$exists false", `{"comment":{"$exists":false}}`, []int{2, 4}},
		{"$exists number", `{"comment":{"$exists":1}}`, []int{1, 3}},
		{"$exists dotted", `{"profile.name":{"$exists":false}}`, []int{4}},
		{"$exists dotted through empty array", `{"exposers.name":{"$exists":true}}`, []int{1, 2}},
		{"$regex", `{"name":{"$regex":"^s[12]$"}}`, []int{1, 2}},
		{"$regex unanchored", `{"name":{"$regex":"3"}}`, []int{3}},
		{"$regex with options", `{"name":{"$regex":"^S1$","$options":"i"}}`, []int{1}},
		{"$regex python \\Z", `{"name":{"$regex":"^s1\\Z"}}`, []int{1}},
		{"$regex on array elements", `{"exposers.name":{"$regex":"^e[23]"}}`, []int{2}},
		{"$regex skips non-strings", `{"size":{"$regex":"1"}}`, nil},
		{"$size", `{"exposers":{"$size":0}}`, []int{3}},
		{"$size two", `{"exposers":{"$size":2}}`, []int{2}},
		{"$not", `{"name":{"$not":{"$regex":"1"}}}`, []int{2, 3, 4}},
		{"$not $gt keeps non-numbers", `{"size":{"$not":{"$gt":5}}}`, []int{2, 4}},
		{"$elemMatch objects same element", `{"exposers":{"$elemMatch":{"name":"e3","type":"nfs"}}}`, []int{2}},
		{"$elemMatch objects no single element", `{"exposers":{"$elemMatch":{"name":"e2","type":"nfs"}}}`, nil},
		{"$elemMatch scalars", `{"templates":{"$elemMatch":{"$gte":4,"$lt":5}}}`, []int{1, 2}},
		{"$elemMatch with $or", `{"exposers":{"$elemMatch":{"$or":[{"name":"e1"},{"name":"e2"}]}}}`, []int{1, 2}},
		{"$and", `{"$and":[{"profile.name":"gold"},{"size":{"$gt":8}}]}`, []int{1}},
		{"$or", `{"$or":[{"name":"s1"},{"status":"NEW"}]}`, []int{1, 2}},
		{"$nor", `{"$nor":[{"name":"s1"},{"status":"NEW"}]}`, []int{3, 4}},
		{"nested $or in $and", `{"$and":[{"$or":[{"name":"s1"},{"name":"s4"}]},{"status":"ACTIVE"}]}`, []int{1, 4}},
		{"missing field", `{"nope":"x"}`, nil},
		{"path through scalar", `{"name.first":"s"}`, nil},
		{"bool vs number do not mix", `{"size":true}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := ParseWhere(tt.where)
			require.NoError(t, err)
			var got []int
			for _, d := range sampleDocs() {
				if f.Match(d) {
					got = append(got, ids([]map[string]any{d})[0])
				}
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseWhereErrors(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"$and":[`, 40) + `{}` + strings.Repeat(`]}`, 40)
	tests := []struct {
		name, where, reason string
	}{
		{"not json", `name=="x"`, "not valid JSON"},
		{"trailing data", `{"a":1} x`, "data after"},
		{"two values", `{"a":1}{"b":2}`, "data after"},
		{"array", `[1]`, "JSON object"},
		{"string", `"x"`, "JSON object"},
		{"null", `null`, "JSON object"},
		{"number out of range", `{"a":1e999}`, "out of range"},
		{"unknown top operator", `{"$where":"1"}`, "unknown operator"},
		{"unknown field operator", `{"a":{"$near":1}}`, "unknown operator"},
		{"mixed operators and fields", `{"a":{"$gt":1,"b":2}}`, "cannot mix"},
		{"$in needs array", `{"a":{"$in":1}}`, "needs an array"},
		{"$nin needs array", `{"a":{"$nin":"x"}}`, "needs an array"},
		{"$all needs array", `{"a":{"$all":{}}}`, "needs an array"},
		{"$exists needs bool", `{"a":{"$exists":"yes"}}`, "$exists"},
		{"$regex needs string", `{"a":{"$regex":1}}`, "$regex needs a string"},
		{"bad regex", `{"a":{"$regex":"("}}`, "bad $regex"},
		{"perl lookahead", `{"a":{"$regex":"(?=x)"}}`, "bad $regex"},
		{"$options alone", `{"a":{"$options":"i"}}`, "$options needs $regex"},
		{"$options x", `{"a":{"$regex":"a","$options":"x"}}`, "only i, m and s"},
		{"$options not string", `{"a":{"$regex":"a","$options":1}}`, "$options needs a string"},
		{"$size negative", `{"a":{"$size":-1}}`, "$size"},
		{"$size fraction", `{"a":{"$size":1.5}}`, "$size"},
		{"$not scalar", `{"a":{"$not":1}}`, "$not"},
		{"$not plain object", `{"a":{"$not":{"b":1}}}`, "$not"},
		{"$elemMatch scalar", `{"a":{"$elemMatch":1}}`, "$elemMatch"},
		{"$and empty", `{"$and":[]}`, "non-empty array"},
		{"$or object", `{"$or":{}}`, "non-empty array"},
		{"$nor scalar element", `{"$nor":[1]}`, "non-empty array"},
		{"empty key", `{"":1}`, "empty field name"},
		{"empty path part", `{"a..b":1}`, "empty part"},
		{"trailing dot", `{"a.":1}`, "empty part"},
		{"dollar path part", `{"a.$b":1}`, "starting with $"},
		{"too deep", deep, "nests more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := ParseWhere(tt.where)
			require.Nil(t, f)
			var qe *QueryError
			require.True(t, errors.As(err, &qe), "want *QueryError, got %T %v", err, err)
			require.Equal(t, ParamWhere, qe.Param)
			require.Contains(t, qe.Reason, tt.reason)
		})
	}
}

func TestNilFilterMatchesAll(t *testing.T) {
	t.Parallel()
	var f *Filter
	require.True(t, f.Match(map[string]any{"a": 1}))
	require.True(t, f.Match(nil))
}

func TestFilterOnGoTypedValues(t *testing.T) {
	t.Parallel()
	// Documents built by Go code rather than decoded JSON still match.
	type status string
	doc := map[string]any{
		"tags":   []string{"x", "y"},
		"limits": map[string]int{"files": 10},
		"count":  uint8(3),
		"status": status("ACTIVE"),
	}
	for _, where := range []string{
		`{"tags":"y"}`, `{"limits.files":{"$gte":10}}`, `{"count":3}`,
		`{"status":"ACTIVE"}`, `{"tags":{"$size":2}}`, `{"tags":["x","y"]}`,
	} {
		f, err := ParseWhere(where)
		require.NoError(t, err)
		require.True(t, f.Match(doc), where)
	}
}
