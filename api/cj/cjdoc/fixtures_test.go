package cjdoc

import (
	"encoding/json"
	"time"
)

// spaceSchema follows the spec's space: name is required, matches the spec's
// Python-style regex and cannot change after creation.
var spaceSchema = Schema{
	Type: "spaces",
	Fields: []Field{
		{Name: "name", Prompt: "Name", Type: TypeString, Required: true, Regex: `^[\w\-]+\Z`, Immutable: true},
		{Name: "owner", Prompt: "Owner", Type: TypeString, Required: true},
		{Name: "templates", Prompt: "Template ids", Type: TypeList},
		{Name: "exposers", Prompt: "Exposers", Type: TypeList},
		{Name: "profile", Prompt: "Profile", Type: TypeObject},
		{Name: "quota", Prompt: "Quota in GiB", Type: TypeInteger},
		{Name: "ratio", Prompt: "Ratio", Type: TypeNumber},
		{Name: "enabled", Prompt: "Enabled", Type: TypeBoolean, Default: true},
		{Name: "labels", Prompt: "Labels", Type: TypeList, Default: []any{"a"}},
		{Name: "comment", Prompt: "Comment", Type: TypeString},
		{Name: "extras", Prompt: "Extras"},
	},
}

// exposerSchema is polymorphic on "type", as the spec's exposers are.
var exposerSchema = Schema{
	Type: "exposers",
	Fields: []Field{
		{Name: "name", Prompt: "Name", Type: TypeString, Required: true, Regex: `^[\w\-]+\Z`},
		{Name: "comment", Prompt: "Comment", Type: TypeString},
	},
	Polymorphic: map[string][]Field{
		"nfs":        {{Name: "clients", Prompt: "Clients", Type: TypeList}},
		"cifs":       {{Name: "share", Prompt: "Share", Type: TypeString, Required: true}},
		"gpfsnative": nil,
	},
}

var created = time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)

// sampleDocs mixes number types and shapes on purpose: int, float64 and json.Number
// ids and sizes, a missing profile, an empty array, a null and a string size.
func sampleDocs() []map[string]any {
	return []map[string]any{
		{
			"id": 1, "_etag": "t1", "name": "s1", "status": "ACTIVE", "comment": "first",
			"profile":   map[string]any{"name": "gold"},
			"exposers":  []any{map[string]any{"name": "e1", "type": "nfs"}},
			"templates": []any{3, 4}, "size": 10, "_created": created,
		},
		{
			"id": 2.0, "_etag": "t2", "name": "s2", "status": "NEW",
			"profile": map[string]any{"name": "silver"},
			"exposers": []any{
				map[string]any{"name": "e2", "type": "cifs"},
				map[string]any{"name": "e3", "type": "nfs"},
			},
			"templates": []any{float64(4)}, "size": 2.5, "_created": created.Add(time.Hour),
		},
		{
			"id": json.Number("3"), "_etag": "t3", "name": "s3", "status": "ERRORED", "comment": nil,
			"profile":  map[string]any{"name": "gold"},
			"exposers": []any{}, "size": json.Number("7"),
		},
		{"id": int64(4), "_etag": "t4", "name": "s4", "status": "ACTIVE", "size": "big"},
	}
}

// ids returns the id of each document as an int, for compact assertions.
func ids(docs []map[string]any) []int {
	out := make([]int, 0, len(docs))
	for _, d := range docs {
		n, ok := asNumber(d["id"])
		switch {
		case !ok:
			out = append(out, -1)
		case n.isInt:
			out = append(out, int(n.i))
		default:
			out = append(out, int(n.f))
		}
	}
	return out
}
