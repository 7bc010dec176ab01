package cjdoc

import (
	"slices"
)

// Version is the Collection+JSON version every collection carries.
const Version = "1.0"

// MediaType is the content type of Collection+JSON requests and responses.
const MediaType = "application/vnd.collection+json"

// Codes put in Error.Code by the errors of this package, so clients can tell the
// kinds of failure apart without parsing messages.
const (
	CodeMalformedBody = "malformed-body"
	CodeInvalidData   = "invalid-data"
	CodeInvalidQuery  = "invalid-query"
)

// Document is the JSON envelope of every C+J message: {"collection": {...}}.
type Document struct {
	Collection Collection `json:"collection"`
}

// Collection is a C+J collection object. Polymorphic resources set Templates (one per
// type) instead of Template.
type Collection struct {
	Version string `json:"version"`
	Href    string `json:"href"`
	// Items is omitted when nil but sent as [] when empty, so an empty page still
	// says "no items" while an error document carries no items at all.
	Items      []Item            `json:"items,omitzero"`
	Links      []Link            `json:"links,omitzero"`
	Queries    []CollectionQuery `json:"queries,omitzero"`
	Template   *Template         `json:"template,omitempty"`
	Templates  []Template        `json:"templates,omitempty"`
	Properties []Data            `json:"properties,omitempty"`
	Error      *Error            `json:"error,omitempty"`
}

// Item is one member of a collection.
type Item struct {
	Href  string `json:"href"`
	Data  []Data `json:"data"`
	Links []Link `json:"links"` // never null: [] when the item has none
}

// Link is a C+J link. Rel uses IANA relation names where one exists.
type Link struct {
	Rel    string `json:"rel"`
	Href   string `json:"href"`
	Name   string `json:"name,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	Render string `json:"render,omitempty"`
}

// CollectionQuery is a C+J query element. It is not called Query because that name
// belongs to the parsed Eve-style list query, which handlers use far more often.
type CollectionQuery struct {
	Rel      string `json:"rel"`
	Href     string `json:"href"`
	Name     string `json:"name,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
	Data     []Data `json:"data,omitempty"`
}

// Template describes the data a client sends to create or update an item. Name is set
// only in the templates of a polymorphic collection, where it is the type's value.
type Template struct {
	Name string `json:"name,omitempty"`
	Data []Data `json:"data"`
}

// Data is a C+J data element. Value is any JSON value: nested objects and arrays are
// kept as they are rather than flattened. Required and Regex are the validation hints
// of template data.
type Data struct {
	Name   string `json:"name"`
	Prompt string `json:"prompt,omitempty"`
	// Value is always sent, as null when unset, so clients need not test for absence.
	Value    any    `json:"value"`
	Required *bool  `json:"required,omitempty"`
	Regex    string `json:"regex,omitempty"`
}

// Error is a C+J error object. Fields, an extension of C+J, names each offending
// field of a rejected write with its own message.
type Error struct {
	Title   string       `json:"title,omitempty"`
	Code    string       `json:"code,omitempty"`
	Message string       `json:"message,omitempty"`
	Fields  []FieldError `json:"fields,omitempty"`
}

// FieldError is the reason one field or query parameter was rejected.
type FieldError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// NewCollection returns an empty collection at href with the C+J version set and
// empty (not absent) item, link and query lists, as the contract shows them.
func NewCollection(href string) Collection {
	return Collection{Version: Version, Href: href, Items: []Item{}, Links: []Link{}, Queries: []CollectionQuery{}}
}

// ErrorDocument returns the document for an error answer about href.
func ErrorDocument(href string, e Error) Document {
	return Document{Collection: Collection{Version: Version, Href: href, Error: &e}}
}

// metaFields are the properties every stored item has besides its schema fields, in
// the order NewItem renders them.
var metaFields = []string{"id", "_etag", "_created", "_modified", "status", "comment", "extras"}

var metaPrompts = map[string]string{
	"id":        "Identifier",
	"_etag":     "Entity tag",
	"_created":  "Created",
	"_modified": "Modified",
	"status":    "Status",
	"comment":   "Comment",
	"extras":    "Extras",
}

// NewItem renders a stored document as a C+J item at href. Data elements come in a
// stable order: the schema's fields (for a polymorphic schema, those of the document's
// type), then the meta fields every item has (id, _etag, _created, _modified, status,
// comment, extras) not already rendered, then any other keys sorted by name.
// Keys absent from doc are left out, so a projected document renders only what the
// projection kept. Values are passed through unchanged.
func NewItem(href string, doc map[string]any, s Schema) Item {
	item := Item{Href: href, Data: make([]Data, 0, len(doc)), Links: []Link{}}
	done := make(map[string]bool, len(doc))
	add := func(name, prompt string) {
		v, ok := doc[name]
		if !ok || done[name] {
			return
		}
		done[name] = true
		item.Data = append(item.Data, Data{Name: name, Prompt: prompt, Value: v})
	}
	typ, _ := doc[Discriminator].(string)
	for _, f := range s.fieldsFor(typ) {
		add(f.Name, f.Prompt)
	}
	for _, name := range metaFields {
		add(name, metaPrompts[name])
	}
	rest := make([]string, 0, len(doc)-len(done))
	for name := range doc {
		if !done[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		add(name, "")
	}
	return item
}

// PageProperties returns the collection properties of a list answer: total (the number
// of matches, also sent as X-Total-Count), page and max_results.
func PageProperties(q Query, total int) []Data {
	return []Data{
		{Name: "total", Prompt: "Total matches", Value: total},
		{Name: ParamPage, Prompt: "Page", Value: max(q.Page, 1)},
		{Name: ParamMaxResults, Prompt: "Items per page", Value: q.MaxResults},
	}
}
