package cjdoc

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Link relations of paging links, as registered with IANA.
const (
	RelSelf     = "self"
	RelNext     = "next"
	RelPrevious = "previous"
	RelLast     = "last"
	RelSearch   = "search"
)

// PageLinks returns the paging links of a list answer: self (the request as
// received), next (unless on the last page or past it), previous (unless on page 1)
// and last (always; page 1 when nothing matched). Each repeats q.Params, the request's
// parameters, with only page changed, so filters, sort, page size and unrelated
// parameters survive. baseHref is the collection's href; if it already has a query,
// the parameters are appended to it. Parameters are encoded in key order.
func PageLinks(baseHref string, q Query, total int) []Link {
	page := max(q.Page, 1)
	last := lastPage(total, q.MaxResults)
	links := []Link{{Rel: RelSelf, Href: withQuery(baseHref, q.Params)}}
	at := func(rel string, n int) Link {
		params := cloneValues(q.Params)
		params.Set(ParamPage, strconv.Itoa(n))
		return Link{Rel: rel, Href: withQuery(baseHref, params), Prompt: fmt.Sprintf("Page %d", n)}
	}
	if page < last {
		links = append(links, at(RelNext, page+1))
	}
	if page > 1 {
		links = append(links, at(RelPrevious, page-1))
	}
	return append(links, at(RelLast, last))
}

func withQuery(href string, params url.Values) string {
	enc := params.Encode()
	switch {
	case enc == "":
		return href
	case strings.Contains(href, "?"):
		return href + "&" + enc
	}
	return href + "?" + enc
}

// SearchQueries returns one C+J query (rel "search", encoding "uri-template") per
// field, each an RFC 6570 URI template for an equality where clause:
//
//	<href>?where=%7B%22<field>%22%3A%22{<field>}%22%7D
//
// which, once {<field>} is expanded, is <href>?where={"<field>":"<value>"}. The
// literal braces and quotes of the JSON are percent-encoded because in a URI template
// a bare { opens an expression. For example, for href /spaces/ and field name:
//
//	/spaces/?where=%7B%22name%22%3A%22{name}%22%7D
//
// Dotted fields (exposers.name) are valid variable names and reach nested fields.
// Characters a variable name may not hold are percent-encoded in it; the query's
// data names the variable as written in the template. The value is always a JSON
// string, so these queries suit string fields. If href already has a query, the where
// parameter is appended with &.
func SearchQueries(href string, fields []string) []CollectionQuery {
	sep := "?"
	if strings.Contains(href, "?") {
		sep = "&"
	}
	queries := make([]CollectionQuery, 0, len(fields))
	for _, field := range fields {
		key := jsonString(field)
		varname := templateVarname(field)
		tmpl := href + sep + ParamWhere + "=" +
			pctEncodeAll(`{`+key+`:"`) + "{" + varname + "}" + pctEncodeAll(`"}`)
		queries = append(queries, CollectionQuery{
			Rel:      RelSearch,
			Href:     tmpl,
			Name:     field,
			Encoding: "uri-template",
			Prompt:   "Search by " + field,
			Data:     []Data{{Name: varname, Prompt: field, Value: ""}},
		})
	}
	return queries
}

// pctEncodeAll percent-encodes every byte outside RFC 3986's unreserved set, which is
// what a URI template literal may hold unencoded without ambiguity.
func pctEncodeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if isUnreserved(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// templateVarname makes field a valid RFC 6570 varname: letters, digits, _ and
// percent-encoded bytes, with single dots between them.
func templateVarname(field string) string {
	var b strings.Builder
	for i := 0; i < len(field); i++ {
		c := field[i]
		inner := i > 0 && i < len(field)-1 && field[i-1] != '.'
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_':
			b.WriteByte(c)
		case c == '.' && inner:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsonString quotes s as a JSON string; marshalling a string cannot fail.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
