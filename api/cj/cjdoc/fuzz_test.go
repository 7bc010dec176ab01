package cjdoc

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"
)

// The fuzz targets assert that no input makes the parsers panic, that every error is
// of the documented type, and that whatever is accepted can be evaluated and
// written back out as JSON.

func FuzzParseWrite(f *testing.F) {
	for _, seed := range []string{
		`{"template":{"data":[{"name":"name","value":"s1"},{"name":"owner","value":"a"}]}}`,
		`{"collection":{"template":{"data":[{"name":"type","value":"nfs"},{"name":"name","value":"e1"},{"name":"clients","value":["a"]}]}}}`,
		`{"template":{"data":[{"name":"quota","value":1e999},{"name":"ratio","value":-0.0},{"name":"extras","value":{"a":[1,2.5,null,{"b":true}]}}]}}`,
		`{"template":{"data":[{"name":"name","value":"x\n"},{"name":"name","value":null},{"name":"type","value":1}]}}`,
		`{"template":{"data":[{"name":"quota","value":9223372036854775808},{"name":"enabled","value":"yes"}]}}`,
		`{"template":{"data":{}}}`, `{"template":null}`, `[]`, `null`, ``, `{`, `{"template":{"data":[]}} x`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, update bool) {
		mode := Create
		if update {
			mode = Update
		}
		nfs, _ := exposerSchema.Variant("nfs")
		for _, s := range []Schema{spaceSchema, exposerSchema, nfs} {
			doc, err := ParseWrite(body, s, mode)
			var be *BodyError
			var ve *ValidationError
			switch {
			case err == nil:
				if _, merr := json.Marshal(doc); merr != nil {
					t.Fatalf("accepted a document that cannot be written as JSON: %v", merr)
				}
				if mode == Create {
					for _, fd := range s.fieldsFor(stringOf(doc[Discriminator])) {
						if _, ok := doc[fd.Name]; fd.Required && !ok {
							t.Fatalf("created without required field %q", fd.Name)
						}
					}
				}
			case errors.As(err, &be):
				mustMarshal(t, ErrorDocument("/x/", be.CJError()))
			case errors.As(err, &ve):
				if len(ve.Fields) == 0 {
					t.Fatalf("validation error without fields")
				}
				mustMarshal(t, ErrorDocument("/x/", ve.CJError()))
			default:
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
		}
	})
}

func FuzzParseWhere(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"name":"s1"}`, `{"exposers.name":"e1"}`, `{"profile.name":{"$ne":"gold"}}`,
		`{"size":{"$gt":5,"$lte":10.5}}`, `{"name":{"$in":["a",null,1]}}`, `{"name":{"$nin":[]}}`,
		`{"comment":{"$exists":false}}`, `{"name":{"$regex":"^s\\d\\Z","$options":"im"}}`,
		`{"$and":[{"a":1},{"$or":[{"b":2},{"$nor":[{"c":3}]}]}]}`, `{"templates":{"$all":[3,4]}}`,
		`{"exposers":{"$elemMatch":{"name":"e1","type":{"$in":["nfs"]}}}}`, `{"templates":{"$elemMatch":{"$gt":1}}}`,
		`{"exposers":{"$size":2}}`, `{"name":{"$not":{"$regex":"x"}}}`, `{"_created":{"$gt":"2024-03-01T10:30:00Z"}}`,
		`{"exposers.0.name":"e2"}`, `{"a":{"b":[1,{"c":null}]}}`, `{"a":1e999}`, `{"a..b":1}`, `[`, `{"$x":1}`,
	} {
		f.Add(seed)
	}
	docs := sampleDocs()
	f.Fuzz(func(t *testing.T, where string) {
		filter, err := ParseWhere(where)
		if err != nil {
			var qe *QueryError
			if !errors.As(err, &qe) || filter != nil {
				t.Fatalf("want *QueryError and no filter, got %T %v", err, err)
			}
			return
		}
		for _, d := range docs {
			if filter.Match(d) != filter.Match(d) {
				t.Fatalf("match is not deterministic")
			}
		}
	})
}

func FuzzQuery(f *testing.F) {
	seeds := [][5]string{
		{`{"profile.name":"gold"}`, "-name", `{"name":1}`, "2", "1"},
		{`{}`, "size,-id", `{"exposers.type":0}`, "1", "4"},
		{``, `[("profile.name", -1), ('name', 1)]`, `{"id":1}`, "", ""},
		{`{"templates":{"$gte":4}}`, "templates", `{"profile.name":1,"_etag":0}`, "100", "2"},
		{`{"$or":[{"size":{"$lt":3}},{"size":"big"}]}`, "exposers.name", ``, "0", "-1"},
		{`{"a":`, "a,,b", `{"a":1,"b":0}`, "x", "99999999999999999999"},
		{``, `[["_created",-1]]`, `{}`, "3", "9223372036854775807"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	docs := sampleDocs()
	f.Fuzz(func(t *testing.T, where, sort, projection, maxResults, page string) {
		values := url.Values{}
		for name, v := range map[string]string{
			ParamWhere: where, ParamSort: sort, ParamProjection: projection,
			ParamMaxResults: maxResults, ParamPage: page,
		} {
			if v != "" {
				values.Set(name, v)
			}
		}
		q, err := ParseQuery(values, Defaults{MaxResults: 2, Cap: 3})
		if err != nil {
			var qe *QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("want *QueryError, got %T %v", err, err)
			}
			mustMarshal(t, ErrorDocument("/x/", qe.CJError()))
			return
		}
		if q.MaxResults < 1 || q.MaxResults > 3 || q.Page < 1 {
			t.Fatalf("paging out of bounds: %+v", q)
		}
		got, total := Apply(docs, q)
		matches := 0
		for _, d := range docs {
			if q.Where.Match(d) {
				matches++
			}
		}
		if total != matches || len(got) > q.MaxResults || got == nil {
			t.Fatalf("total %d (want %d), page of %d with max %d", total, matches, len(got), q.MaxResults)
		}
		if again, _ := Apply(docs, q); len(again) != len(got) {
			t.Fatalf("Apply is not deterministic")
		}
		for _, l := range PageLinks("/spaces/", q, total) {
			if _, err := url.Parse(l.Href); err != nil {
				t.Fatalf("bad link %q: %v", l.Href, err)
			}
		}
		c := NewCollection("/spaces/")
		for _, d := range got {
			c.Items = append(c.Items, NewItem("/spaces/x", d, spaceSchema))
		}
		mustMarshal(t, Document{Collection: c})
	})
}

func mustMarshal(t *testing.T, v any) {
	t.Helper()
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("cannot marshal %T: %v", v, err)
	}
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
