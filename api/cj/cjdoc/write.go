package cjdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// BodyError means a write body is not a C+J write template at all: not JSON, or JSON
// of another shape. The server answers 400 with CJError.
type BodyError struct {
	// Reason says what is wrong, for the client.
	Reason string
}

// Error implements error.
func (e *BodyError) Error() string { return "malformed body: " + e.Reason }

// CJError renders the error as a C+J error object.
func (e *BodyError) CJError() Error {
	return Error{Title: "Malformed request body", Code: CodeMalformedBody, Message: e.Error()}
}

// ValidationError means a well-formed write template broke the schema's rules. It
// names every offending field; the server answers 422 with CJError.
type ValidationError struct {
	// Fields holds one entry per offending field, in the order the body sent them,
	// then the missing required fields in schema order.
	Fields []FieldError
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Name + " " + f.Message
	}
	return "invalid data: " + strings.Join(parts, "; ")
}

// CJError renders the error as a C+J error object listing each field.
func (e *ValidationError) CJError() Error {
	return Error{Title: "Invalid data", Code: CodeInvalidData, Message: e.Error(), Fields: slices.Clone(e.Fields)}
}

// ParseWrite reads a C+J write body, {"template": {"data": [{"name": n, "value": v},
// ...]}} (also accepted inside {"collection": ...}), and checks it against s.
//
// Create wants a whole item: every required field, no unknown field; omitted
// optional fields get their Default. Update wants only the fields to change and
// refuses immutable ones. Both check each value's type and regex and refuse a field
// named twice. A null value counts as absent on create; on update it clears an
// optional field (the result maps the name to nil) and is refused for a required one.
// For a polymorphic schema the "type" field selects the variant on create; for an
// update pass s.Variant(storedType), since the polymorphic schema itself lets through
// the fields of every type.
//
// The result maps field names to values as encoding/json decodes them, except that
// numbers are int64 when integral and float64 otherwise (integer fields: int64,
// number fields: float64). Errors are *BodyError (400) or *ValidationError (422). The
// body's size is for the caller to limit.
func ParseWrite(body []byte, s Schema, mode Mode) (map[string]any, error) {
	return parseWrite(body, s, mode, nil)
}

// ParseUpdate is ParseWrite(body, s, Update), except that an immutable field sent
// with the value it already has in current is accepted and left out of the result:
// only changing it is refused.
func ParseUpdate(body []byte, s Schema, current map[string]any) (map[string]any, error) {
	return parseWrite(body, s, Update, current)
}

func parseWrite(body []byte, s Schema, mode Mode, current map[string]any) (map[string]any, error) {
	entries, err := decodeTemplate(body)
	if err != nil {
		return nil, err
	}

	count := make(map[string]int, len(entries))
	for _, e := range entries {
		count[e.name]++
	}
	typ := ""
	if mode == Create && count[Discriminator] == 1 {
		for _, e := range entries {
			if e.name == Discriminator {
				typ, _ = e.value.(string)
			}
		}
	}
	fields := s.fieldsFor(typ)
	byName := make(map[string]Field, len(fields))
	for _, f := range fields {
		if _, dup := byName[f.Name]; !dup {
			byName[f.Name] = f
		}
	}

	var errs []FieldError
	fail := func(name, msg string) { errs = append(errs, FieldError{Name: name, Message: msg}) }
	out := make(map[string]any, len(fields))
	given := make(map[string]bool, len(entries))
	for _, e := range entries {
		if count[e.name] > 1 {
			if !given[e.name] {
				fail(e.name, "is given more than once")
			}
			given[e.name] = true
			continue
		}
		f, known := byName[e.name]
		if !known {
			fail(e.name, "is not a field of this resource")
			continue
		}
		given[e.name] = true
		if mode == Update && f.Immutable {
			if cur, ok := current[e.name]; !ok || !sameJSON(cur, e.value) {
				fail(e.name, "cannot be changed")
			}
			continue
		}
		if e.value == nil {
			switch {
			case mode == Create:
				given[e.name] = false // so that the required and default rules apply
			case f.Required:
				fail(e.name, "is required and cannot be cleared")
			default:
				out[e.name] = nil
			}
			continue
		}
		v, msg := checkValue(f, e.value)
		if msg == "" && s.IsPolymorphic() && f.Name == Discriminator {
			// Only a string can name a variant, whatever the declared field's type.
			name, _ := v.(string)
			if _, ok := s.Polymorphic[name]; !ok {
				msg = "must be one of: " + strings.Join(s.Variants(), ", ")
			}
		}
		if msg != "" {
			fail(e.name, msg)
			continue
		}
		out[e.name] = v
	}
	if mode == Create {
		whole := fields
		if _, known := s.Polymorphic[typ]; s.IsPolymorphic() && !known {
			// Without a valid type only the shared fields are known to be wanted;
			// the type's own error says the rest.
			whole = s.baseFields()
		}
		for _, f := range whole {
			switch {
			case given[f.Name]:
			case f.Required:
				fail(f.Name, "is required")
			case f.Default != nil:
				v, msg := checkValue(f, f.Default)
				if msg != "" {
					// A schema mistake Schema.Validate reports.
					fail(f.Name, "cannot be defaulted: the server's default for it is invalid")
					continue
				}
				out[f.Name] = v
			}
		}
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Fields: errs}
	}
	return out, nil
}

// entry is one data element of a write template.
type entry struct {
	name  string
	value any
}

// decodeTemplate checks the shape of a write body and returns its data elements with
// numbers still as json.Number, so that integer checks see the digits sent.
func decodeTemplate(body []byte) ([]entry, error) {
	const shape = `{"template": {"data": [{"name": ..., "value": ...}]}}`
	bad := func(format string, args ...any) error {
		return &BodyError{Reason: fmt.Sprintf(format, args...)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top any
	if err := dec.Decode(&top); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad("the body is empty; expected %s", shape)
		}
		return nil, bad("not valid JSON: %v", err)
	}
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, bad("not valid JSON: data after the value")
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, bad("expected %s", shape)
	}
	tmpl, ok := obj["template"]
	if !ok {
		if coll, isObj := obj["collection"].(map[string]any); isObj {
			tmpl, ok = coll["template"]
		}
	}
	if !ok {
		return nil, bad("no template; expected %s", shape)
	}
	t, ok := tmpl.(map[string]any)
	if !ok {
		return nil, bad("template must be an object; expected %s", shape)
	}
	data, ok := t["data"].([]any)
	if !ok {
		return nil, bad("template.data must be an array; expected %s", shape)
	}
	entries := make([]entry, 0, len(data))
	for i, d := range data {
		el, ok := d.(map[string]any)
		if !ok {
			return nil, bad("template.data[%d] must be an object", i)
		}
		name, ok := el["name"].(string)
		if !ok || name == "" {
			return nil, bad("template.data[%d].name must be a non-empty string", i)
		}
		entries = append(entries, entry{name: name, value: el["value"]})
	}
	return entries, nil
}

// checkValue checks a non-null value against a field's type and regex and returns it
// in its stored form, or a message saying what is wrong.
func checkValue(f Field, v any) (any, string) {
	var out any
	switch k := kindOf(v); f.Type {
	case TypeString:
		if k != kindString {
			return nil, "must be a string"
		}
		out, _ = asString(v)
	case TypeInteger:
		n, ok := asNumber(v)
		switch {
		case !ok || k != kindNumber:
			return nil, "must be an integer"
		case n.isInt:
			out = n.i
		case n.f != math.Trunc(n.f):
			return nil, "must be an integer"
		case n.f < -(1<<63) || n.f >= 1<<63:
			return nil, "is out of range"
		default:
			out = int64(n.f)
		}
	case TypeNumber:
		n, ok := asNumber(v)
		switch {
		case !ok || k != kindNumber:
			return nil, "must be a number"
		case n.isInt:
			out = float64(n.i)
		case math.IsInf(n.f, 0) || math.IsNaN(n.f):
			return nil, "is out of range"
		default:
			out = n.f
		}
	case TypeBoolean:
		if k != kindBool {
			return nil, "must be true or false"
		}
		out = asBool(v)
	case TypeList:
		l, ok := asList(v)
		if !ok {
			return nil, "must be a list"
		}
		out = l
	case TypeObject:
		m, ok := asMap(v)
		if !ok {
			return nil, "must be an object"
		}
		out = m
	default:
		out = v
	}
	out, ok := normalize(out)
	if !ok {
		return nil, "holds a number out of range"
	}
	if s, isString := out.(string); isString && f.Regex != "" {
		re, err := compileFieldRegex(f.Regex)
		if err != nil {
			// A schema mistake Schema.Validate reports; refuse rather than store
			// unchecked data.
			return nil, "cannot be checked: the server's pattern for it is invalid"
		}
		if !re.MatchString(s) {
			if f.RegexHint != "" {
				return nil, "must match " + f.Regex + ": " + f.RegexHint
			}
			return nil, "must match " + f.Regex
		}
	}
	return out, ""
}

// sameJSON tells whether two decoded JSON values encode alike.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
