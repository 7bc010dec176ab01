package cjdoc

import (
	"errors"
	"math"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseQueryDefaults(t *testing.T) {
	t.Parallel()
	q, err := ParseQuery(url.Values{}, Defaults{})
	require.NoError(t, err)
	require.Nil(t, q.Where)
	require.Nil(t, q.Projection)
	require.Empty(t, q.Sort)
	require.Equal(t, DefaultMaxResults, q.MaxResults)
	require.Equal(t, 1, q.Page)

	q, err = ParseQuery(url.Values{"where": {""}, "sort": {""}, "projection": {""}}, Defaults{MaxResults: 10, Cap: 5})
	require.NoError(t, err)
	require.Nil(t, q.Where, "an empty parameter counts as absent")
	require.Equal(t, 5, q.MaxResults, "the default page size is cut down to the cap")
}

func TestParseQueryAll(t *testing.T) {
	t.Parallel()
	in := url.Values{
		"where":       {`{"profile.name":"gold"}`},
		"projection":  {`{"name":1}`},
		"sort":        {"-name"},
		"max_results": {"1"},
		"page":        {"2"},
		"other":       {"kept"},
	}
	q, err := ParseQuery(in, Defaults{})
	require.NoError(t, err)
	require.Equal(t, []SortKey{{Field: "name", Descending: true}}, q.Sort)
	require.Equal(t, 1, q.MaxResults)
	require.Equal(t, 2, q.Page)
	require.Equal(t, in, q.Params)
	in["other"][0] = "changed"
	require.Equal(t, "kept", q.Params.Get("other"), "Params is a copy")

	page, total := Apply(sampleDocs(), q)
	require.Equal(t, 2, total)
	require.Equal(t, []map[string]any{{"id": 1, "_etag": "t1", "name": "s1"}}, page)
}

func TestParseQueryMaxResultsCap(t *testing.T) {
	t.Parallel()
	q, err := ParseQuery(url.Values{"max_results": {"500"}}, Defaults{Cap: 50})
	require.NoError(t, err)
	require.Equal(t, 50, q.MaxResults)
	q, err = ParseQuery(url.Values{"max_results": {"500"}}, Defaults{})
	require.NoError(t, err)
	require.Equal(t, DefaultMaxResultsCap, q.MaxResults)
}

func TestParseQueryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values url.Values
		param  string
	}{
		{"bad where", url.Values{"where": {"{"}}, "where"},
		{"where twice", url.Values{"where": {"{}", "{}"}}, "where"},
		{"bad projection", url.Values{"projection": {`{"a":1,"b":0}`}}, "projection"},
		{"bad sort", url.Values{"sort": {"a,,b"}}, "sort"},
		{"max_results zero", url.Values{"max_results": {"0"}}, "max_results"},
		{"max_results negative", url.Values{"max_results": {"-3"}}, "max_results"},
		{"max_results text", url.Values{"max_results": {"ten"}}, "max_results"},
		{"max_results fraction", url.Values{"max_results": {"1.5"}}, "max_results"},
		{"max_results huge", url.Values{"max_results": {"99999999999999999999999"}}, "max_results"},
		{"page zero", url.Values{"page": {"0"}}, "page"},
		{"page space", url.Values{"page": {" 2"}}, "page"},
		{"page twice", url.Values{"page": {"1", "2"}}, "page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseQuery(tt.values, Defaults{})
			var qe *QueryError
			require.True(t, errors.As(err, &qe), "want *QueryError, got %T %v", err, err)
			require.Equal(t, tt.param, qe.Param)
			cj := qe.CJError()
			require.Equal(t, CodeInvalidQuery, cj.Code)
			require.Equal(t, tt.param, cj.Fields[0].Name)
		})
	}
}

func TestParseSort(t *testing.T) {
	t.Parallel()
	asc := func(f string) SortKey { return SortKey{Field: f} }
	desc := func(f string) SortKey { return SortKey{Field: f, Descending: true} }
	tests := []struct {
		in   string
		want []SortKey
	}{
		{"name", []SortKey{asc("name")}},
		{"-name", []SortKey{desc("name")}},
		{" name , -profile.name ", []SortKey{asc("name"), desc("profile.name")}},
		{`[("name", -1)]`, []SortKey{desc("name")}},
		{`[("name", 1), ('profile.name', -1)]`, []SortKey{asc("name"), desc("profile.name")}},
		{`[("name", +1,),]`, []SortKey{asc("name")}},
		{`[["name",-1]]`, []SortKey{desc("name")}},
		{` [ ] `, nil},
	}
	for _, tt := range tests {
		got, err := ParseSort(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
	for _, bad := range []string{
		"", ",", "name,", "-", "- ", "a..b", "name,-name", "$a",
		`[("name", 2)]`, `[("name", 10)]`, `[("name" -1)]`, `[(name, 1)]`, `[("name", 1)`,
		`[("na\"me", 1)]`, `[("name", 1)] x`, `[("name", 1))]`, `[`, `[("", 1)]`, `[("name", 1] `,
	} {
		_, err := ParseSort(bad)
		var qe *QueryError
		require.True(t, errors.As(err, &qe), "%q: want *QueryError, got %v", bad, err)
		require.Equal(t, ParamSort, qe.Param)
	}
}

func TestApplySort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sort string
		want []int
	}{
		{"name", []int{1, 2, 3, 4}},
		{"-name", []int{4, 3, 2, 1}},
		// Missing first ascending, last descending; ties keep input order.
		{"profile.name", []int{4, 1, 3, 2}},
		{"-profile.name", []int{2, 1, 3, 4}},
		// int, float64, json.Number by value, then the string.
		{"size", []int{2, 3, 1, 4}},
		{"-size", []int{4, 1, 3, 2}},
		// Arrays sort by their smallest element ascending, largest descending.
		{"templates", []int{3, 4, 1, 2}},
		{"-templates", []int{1, 2, 3, 4}},
		{"exposers.name", []int{3, 4, 1, 2}},
		{"-exposers.name", []int{2, 1, 3, 4}},
		{"status,-name", []int{4, 1, 3, 2}},
		{`[("status", 1), ("name", 1)]`, []int{1, 4, 3, 2}},
		{"id", []int{1, 2, 3, 4}},
		{"-id", []int{4, 3, 2, 1}},
	}
	for _, tt := range tests {
		keys, err := ParseSort(tt.sort)
		require.NoError(t, err)
		page, total := Apply(sampleDocs(), Query{Sort: keys})
		require.Equal(t, 4, total)
		require.Equal(t, tt.want, ids(page), tt.sort)
	}
}

func TestApplySortMixedTypes(t *testing.T) {
	t.Parallel()
	values := []any{
		true, "b", map[string]any{"x": 1}, []any{5, 0}, nil, created, 2.5, []any{},
		false, "a", 1, []any{[]any{1}}, map[string]any{}, 1e300, math.Inf(-1),
	}
	var docs []map[string]any
	for i, v := range values {
		docs = append(docs, map[string]any{"id": i, "v": v})
	}
	docs = append(docs, map[string]any{"id": len(values)}) // v missing
	// missing (and empty array), null, numbers (-Inf, 0 from [5,0], 1, 2.5, 1e300),
	// strings, objects ({} before {x:1}), arrays ([1] from [[1]]), booleans, times.
	want := []int{7, 15, 4, 14, 3, 10, 6, 13, 9, 1, 12, 2, 11, 8, 0, 5}
	page, _ := Apply(docs, Query{Sort: []SortKey{{Field: "v"}}})
	require.Equal(t, want, ids(page))

	// Descending arrays use their largest element: [5,0] sorts as 5.
	page, _ = Apply(docs, Query{Sort: []SortKey{{Field: "v", Descending: true}}})
	require.Equal(t, []int{5, 0, 8, 11, 2, 12, 1, 9, 13, 3, 6, 10, 14, 4, 7, 15}, ids(page))
}

func TestCompareNumbersExact(t *testing.T) {
	t.Parallel()
	big := int64(1<<53 + 1)
	require.Equal(t, 1, compareValues(big, float64(1<<53)), "no rounding of large ints")
	require.Equal(t, 0, compareValues(int64(3), 3.0))
	require.Equal(t, -1, compareValues(uint64(math.MaxUint64), math.Inf(1)))
	require.Equal(t, 1, compareValues(uint64(math.MaxUint64), int64(math.MaxInt64)))
	require.Equal(t, -1, compareValues(math.NaN(), math.Inf(-1)))
	require.Equal(t, -1, compareValues(math.NaN(), int64(0)))
	require.Equal(t, 1, compareValues(int64(0), math.NaN()))
	require.Equal(t, 1, compareValues(-0.5, int64(-1)))
	require.Equal(t, 1, compareValues(created.Add(time.Second), created))
}

func TestProjection(t *testing.T) {
	t.Parallel()
	doc := sampleDocs()[1]
	tests := []struct {
		name, projection string
		want             map[string]any
	}{
		{"include", `{"name":1}`, map[string]any{"id": 2.0, "_etag": "t2", "name": "s2"}},
		{"include true", `{"name":true,"status":1}`, map[string]any{"id": 2.0, "_etag": "t2", "name": "s2", "status": "NEW"}},
		{"include dotted", `{"profile.name":1}`, map[string]any{"id": 2.0, "_etag": "t2", "profile": map[string]any{"name": "silver"}}},
		{"include dotted into array", `{"exposers.type":1}`, map[string]any{
			"id": 2.0, "_etag": "t2",
			"exposers": []any{map[string]any{"type": "cifs"}, map[string]any{"type": "nfs"}},
		}},
		{"include missing field", `{"nope":1}`, map[string]any{"id": 2.0, "_etag": "t2"}},
		{"include into scalar drops it", `{"name.x":1}`, map[string]any{"id": 2.0, "_etag": "t2"}},
		{"include with id 0 keeps id", `{"name":1,"id":0}`, map[string]any{"id": 2.0, "_etag": "t2", "name": "s2"}},
		{"only kept fields", `{"id":1}`, map[string]any{"id": 2.0, "_etag": "t2"}},
		{"exclude", `{"exposers":0,"templates":false,"_created":0}`, map[string]any{
			"id": 2.0, "_etag": "t2", "name": "s2", "status": "NEW",
			"profile": map[string]any{"name": "silver"}, "size": 2.5,
		}},
		{"exclude dotted", `{"exposers.type":0,"profile.name":0,"templates":0,"_created":0}`, map[string]any{
			"id": 2.0, "_etag": "t2", "name": "s2", "status": "NEW", "size": 2.5,
			"profile":  map[string]any{},
			"exposers": []any{map[string]any{"name": "e2"}, map[string]any{"name": "e3"}},
		}},
		{"exclude ignores kept fields", `{"id":0,"_etag":0,"exposers":0,"templates":0,"profile":0,"_created":0}`, map[string]any{
			"id": 2.0, "_etag": "t2", "name": "s2", "status": "NEW", "size": 2.5,
		}},
		{"exclude with id 1 is exclusion", `{"id":1,"exposers":0,"templates":0,"profile":0,"_created":0}`, map[string]any{
			"id": 2.0, "_etag": "t2", "name": "s2", "status": "NEW", "size": 2.5,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParseProjection(tt.projection)
			require.NoError(t, err)
			before := sampleDocs()[1]
			require.Equal(t, tt.want, p.Apply(doc))
			require.Equal(t, before, doc, "the input is not changed")
		})
	}
}

func TestProjectionNoop(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{}`, `{"id":0}`, `{"_etag":false,"href":0}`} {
		p, err := ParseProjection(s)
		require.NoError(t, err)
		require.Nil(t, p, s)
		doc := map[string]any{"a": 1}
		require.Equal(t, doc, p.Apply(doc))
	}
}

func TestProjectionErrors(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{"name":1,"comment":0}`, `{"name":2}`, `{"name":-1}`, `{"name":"1"}`, `{"name":null}`,
		`{"name":{"$slice":1}}`, `[1]`, `"name"`, `{`, `{"a":1,"a.b":1}`, `{"a.b":0,"a":0}`,
		`{"":1}`, `{"a..b":1}`, `{"$a":1}`,
	} {
		p, err := ParseProjection(s)
		require.Nil(t, p, s)
		var qe *QueryError
		require.True(t, errors.As(err, &qe), "%s: want *QueryError, got %v", s, err)
		require.Equal(t, ParamProjection, qe.Param)
	}
}

func TestApplyPaging(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		page, size int
		want       []int
	}{
		{"first page", 1, 3, []int{1, 2, 3}},
		{"partial last page", 2, 3, []int{4}},
		{"exact last page", 2, 2, []int{3, 4}},
		{"past the end", 3, 2, []int{}},
		{"far past the end", math.MaxInt, 2, []int{}},
		{"huge size", 1, math.MaxInt, []int{1, 2, 3, 4}},
		{"huge size page 2", 2, math.MaxInt, []int{}},
		{"zero page means 1", 0, 1, []int{1}},
		{"no paging", 1, 0, []int{1, 2, 3, 4}},
		{"no paging ignores page", 5, -1, []int{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		page, total := Apply(sampleDocs(), Query{Page: tt.page, MaxResults: tt.size})
		require.Equal(t, 4, total, tt.name)
		require.NotNil(t, page, tt.name)
		require.Equal(t, tt.want, ids(page), tt.name)
	}

	page, total := Apply(nil, Query{Page: 1, MaxResults: 25})
	require.Equal(t, 0, total)
	require.NotNil(t, page)
	require.Empty(t, page)
}

func TestApplyFilterSortPageProject(t *testing.T) {
	t.Parallel()
	values := url.Values{
		"where":       {`{"status":{"$in":["ACTIVE","ERRORED"]}}`},
		"sort":        {"-name"},
		"projection":  {`{"status":1}`},
		"max_results": {"2"},
	}
	q, err := ParseQuery(values, Defaults{})
	require.NoError(t, err)
	page, total := Apply(sampleDocs(), q)
	require.Equal(t, 3, total)
	require.Equal(t, []map[string]any{
		{"id": int64(4), "_etag": "t4", "status": "ACTIVE"},
		{"id": thirdID(), "_etag": "t3", "status": "ERRORED"},
	}, page)

	values.Set("page", strconv.Itoa(2))
	q, err = ParseQuery(values, Defaults{})
	require.NoError(t, err)
	page, total = Apply(sampleDocs(), q)
	require.Equal(t, 3, total)
	require.Equal(t, []int{1}, ids(page))
}

// thirdID is the json.Number id of the third sample document.
func thirdID() any { return sampleDocs()[2]["id"] }
