package cjdoc

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPageLinks(t *testing.T) {
	t.Parallel()
	params := url.Values{
		"where":       {`{"name":"s1"}`},
		"max_results": {"25"},
		"page":        {"2"},
		"foo":         {"a b"},
	}
	q, err := ParseQuery(params, Defaults{})
	require.NoError(t, err)

	links := PageLinks("/spaces/", q, 60)
	rels := map[string]url.Values{}
	var order []string
	for _, l := range links {
		order = append(order, l.Rel)
		u, err := url.Parse(l.Href)
		require.NoError(t, err)
		require.Equal(t, "/spaces/", u.Path)
		rels[l.Rel] = u.Query()
	}
	require.Equal(t, []string{"self", "next", "previous", "last"}, order)
	require.Equal(t, "2", rels["self"].Get("page"))
	require.Equal(t, "3", rels["next"].Get("page"))
	require.Equal(t, "1", rels["previous"].Get("page"))
	require.Equal(t, "3", rels["last"].Get("page"))
	for rel, v := range rels {
		require.Equal(t, `{"name":"s1"}`, v.Get("where"), rel)
		require.Equal(t, "a b", v.Get("foo"), rel)
		require.Equal(t, "25", v.Get("max_results"), rel)
	}
	require.Equal(t, "/spaces/?foo=a+b&max_results=25&page=3&where=%7B%22name%22%3A%22s1%22%7D", links[1].Href)
}

func TestPageLinksEdges(t *testing.T) {
	t.Parallel()
	rels := func(page, size, total int) map[string]string {
		q := Query{Page: page, MaxResults: size, Params: url.Values{"page": {strconv.Itoa(page)}}}
		out := map[string]string{}
		for _, l := range PageLinks("/x/", q, total) {
			out[l.Rel] = l.Href
		}
		return out
	}
	require.Equal(t, map[string]string{"self": "/x/?page=1", "next": "/x/?page=2", "last": "/x/?page=3"}, rels(1, 10, 25))
	require.Equal(t, map[string]string{"self": "/x/?page=3", "previous": "/x/?page=2", "last": "/x/?page=3"}, rels(3, 10, 25))
	require.Equal(t, map[string]string{"self": "/x/?page=1", "last": "/x/?page=1"}, rels(1, 10, 0))
	require.Equal(t, map[string]string{"self": "/x/?page=1", "last": "/x/?page=1"}, rels(1, 10, 10))
	// Past the end: no next; previous steps back one page.
	require.Equal(t, map[string]string{"self": "/x/?page=9", "previous": "/x/?page=8", "last": "/x/?page=3"}, rels(9, 10, 25))
	// Unpaged: a single page.
	require.Equal(t, map[string]string{"self": "/x/?page=1", "last": "/x/?page=1"}, rels(1, 0, 25))
	// No parameters at all, and a base that already has a query.
	links := PageLinks("/x/?a=1", Query{MaxResults: 1}, 2)
	require.Equal(t, []Link{
		{Rel: "self", Href: "/x/?a=1"},
		{Rel: "next", Href: "/x/?a=1&page=2", Prompt: "Page 2"},
		{Rel: "last", Href: "/x/?a=1&page=2", Prompt: "Page 2"},
	}, links)
}

func TestSearchQueries(t *testing.T) {
	t.Parallel()
	qs := SearchQueries("/spaces/", []string{"name", "exposers.name", "profile.name"})
	require.Len(t, qs, 3)
	require.Equal(t, CollectionQuery{
		Rel:      "search",
		Href:     `/spaces/?where=%7B%22name%22%3A%22{name}%22%7D`,
		Name:     "name",
		Encoding: "uri-template",
		Prompt:   "Search by name",
		Data:     []Data{{Name: "name", Prompt: "name", Value: ""}},
	}, qs[0])
	require.Equal(t, `/spaces/?where=%7B%22exposers.name%22%3A%22{exposers.name}%22%7D`, qs[1].Href)

	// Expanding the template (simple string expansion percent-encodes the value)
	// gives a where clause ParseWhere accepts and that finds the item.
	for i, value := range []string{"s1", "e3", "gold"} {
		href := strings.Replace(qs[i].Href, "{"+qs[i].Data[0].Name+"}", url.PathEscape(value), 1)
		u, err := url.Parse(href)
		require.NoError(t, err)
		q, err := ParseQuery(u.Query(), Defaults{})
		require.NoError(t, err, href)
		page, total := Apply(sampleDocs(), q)
		require.Positive(t, total, href)
		require.NotEmpty(t, page)
	}

	odd := SearchQueries("/x/?a=1", []string{`we"ird-name`, ".a..b."})
	require.Equal(t, `/x/?a=1&where=%7B%22we%5C%22ird-name%22%3A%22{we%22ird%2Dname}%22%7D`, odd[0].Href)
	require.Equal(t, "%2Ea.%2Eb%2E", odd[1].Data[0].Name)
}
