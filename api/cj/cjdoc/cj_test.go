package cjdoc

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewItemOrder(t *testing.T) {
	t.Parallel()
	doc := map[string]any{
		"zeta": 1, "status": "ACTIVE", "id": 7, "_etag": "abc", "alpha": true,
		"profile": map[string]any{"name": "gold"}, "name": "s1", "templates": []any{3, 4},
	}
	item := NewItem("/spaces/7", doc, spaceSchema)
	require.Equal(t, "/spaces/7", item.Href)
	var names []string
	for _, d := range item.Data {
		names = append(names, d.Name)
	}
	require.Equal(t, []string{"name", "templates", "profile", "id", "_etag", "status", "alpha", "zeta"}, names)
	require.Equal(t, Data{Name: "profile", Prompt: "Profile", Value: map[string]any{"name": "gold"}}, item.Data[2])
	require.Equal(t, Data{Name: "id", Prompt: "Identifier", Value: 7}, item.Data[3])

	// A polymorphic item renders its type's fields in schema order.
	exp := NewItem("/exposers/1", map[string]any{"clients": []any{}, "name": "e1", "type": "nfs", "id": 1}, exposerSchema)
	names = nil
	for _, d := range exp.Data {
		names = append(names, d.Name)
	}
	require.Equal(t, []string{"type", "name", "clients", "id"}, names)
}

func TestDocumentJSON(t *testing.T) {
	t.Parallel()
	q, err := ParseQuery(url.Values{"max_results": {"1"}}, Defaults{})
	require.NoError(t, err)
	page, total := Apply([]map[string]any{{"id": 1, "name": "s1", "profile": map[string]any{"name": "gold"}}}, q)

	c := NewCollection("/spaces/")
	for _, d := range page {
		c.Items = append(c.Items, NewItem("/spaces/1", d, spaceSchema))
	}
	c.Links = PageLinks("/spaces/", q, total)
	c.Properties = PageProperties(q, total)
	c.SetCreateTemplate(Schema{Fields: []Field{{Name: "name", Prompt: "Name", Required: true, Regex: `^\w+\Z`}}})
	got, err := json.Marshal(Document{Collection: c})
	require.NoError(t, err)
	require.JSONEq(t, `{"collection":{
		"version":"1.0","href":"/spaces/",
		"items":[{"href":"/spaces/1","data":[
			{"name":"name","prompt":"Name","value":"s1"},
			{"name":"profile","prompt":"Profile","value":{"name":"gold"}},
			{"name":"id","prompt":"Identifier","value":1}],"links":[]}],
		"queries":[],
		"links":[
			{"rel":"self","href":"/spaces/?max_results=1"},
			{"rel":"last","href":"/spaces/?max_results=1&page=1","prompt":"Page 1"}],
		"template":{"data":[{"name":"name","prompt":"Name","value":null,"required":true,"regex":"^\\w+\\Z"}]},
		"properties":[
			{"name":"total","prompt":"Total matches","value":1},
			{"name":"page","prompt":"Page","value":1},
			{"name":"max_results","prompt":"Items per page","value":1}]
	}}`, string(got))

	empty, err := json.Marshal(Document{Collection: NewCollection("/spaces/")})
	require.NoError(t, err)
	require.JSONEq(t, `{"collection":{"version":"1.0","href":"/spaces/","items":[],"links":[],"queries":[]}}`, string(empty))

	_, werr := ParseWrite([]byte(`{"template":{"data":[]}}`), spaceSchema, Create)
	ve, ok := werr.(*ValidationError)
	require.True(t, ok)
	errDoc, err := json.Marshal(ErrorDocument("/spaces/", ve.CJError()))
	require.NoError(t, err)
	require.JSONEq(t, `{"collection":{"version":"1.0","href":"/spaces/","error":{
		"title":"Invalid data","code":"invalid-data",
		"message":"invalid data: name is required; owner is required",
		"fields":[{"name":"name","message":"is required"},{"name":"owner","message":"is required"}]}}}`, string(errDoc))
}
