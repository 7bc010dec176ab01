// Package cjdoc is the document layer of the storage-management REST API: the
// Collection+JSON (C+J) types the API speaks, the parsing and validation of C+J write
// templates against a field schema, and Eve-style list queries (where, projection,
// sort, max_results, page) evaluated over JSON documents held in memory.
//
// The package does no I/O and knows nothing about HTTP or the database. Handlers use it
// like this:
//
//	q, err := cjdoc.ParseQuery(r.URL.Query(), cjdoc.Defaults{})   // *QueryError → 400
//	page, total := cjdoc.Apply(docs, q)
//	coll := cjdoc.NewCollection(href)
//	for _, d := range page { coll.Items = append(coll.Items, cjdoc.NewItem(itemHref, d, schema)) }
//	coll.Links = cjdoc.PageLinks(href, q, total)
//	coll.Queries = cjdoc.SearchQueries(href, []string{"name"})
//	coll.Properties = cjdoc.PageProperties(q, total)
//	coll.SetCreateTemplate(schema)
//	json.NewEncoder(w).Encode(cjdoc.Document{Collection: coll})
//
//	doc, err := cjdoc.ParseWrite(body, schema, cjdoc.Create) // *BodyError → 400, *ValidationError → 422
//
// Documents are JSON values as encoding/json decodes them: map[string]any, []any,
// string, bool, nil and numbers. Numbers may be float64, json.Number or any Go integer
// type, and compare by value. Documents must be acyclic, as decoded JSON always is.
package cjdoc
