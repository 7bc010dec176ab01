package cjdoc

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Field types a Field may declare. An empty Type accepts any JSON value.
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeList    = "list"
	TypeObject  = "object"
)

// Discriminator is the field whose value selects the variant of a polymorphic schema,
// e.g. "nfs" for an exposer.
const Discriminator = "type"

// Field describes one writable field of a resource.
type Field struct {
	Name   string
	Prompt string
	// Type is one of the Type constants; empty accepts any JSON value.
	Type     string
	Required bool
	// Regex is checked against string values and must match the whole value. It may
	// be written in Python's dialect as the spec does (`^[\w\-]+\Z`): \Z is read as
	// Go's \z. Go's \w and \d are ASCII-only, so they are stricter than Python's.
	Regex string
	// RegexHint, when set, says in words what Regex refuses; a value that
	// does not match is answered "must match <Regex>: <RegexHint>".
	RegexHint string
	// Immutable fields may be set on create but never changed by an update.
	Immutable bool
	// Default is stored when a create omits the field; it is copied, never shared.
	Default any
}

// Schema describes the writable fields of a resource type.
type Schema struct {
	// Type is the resource type name, e.g. "spaces".
	Type   string
	Fields []Field
	// Polymorphic, when not empty, maps each value of the Discriminator field to the
	// fields that only items of that type have. Fields lists the fields they share;
	// the Discriminator field is implied (required, immutable string) unless declared.
	Polymorphic map[string][]Field
}

// Mode says whether a write creates an item or updates one.
type Mode int

const (
	// Create checks a complete new item: required fields, no unknown fields.
	Create Mode = iota
	// Update checks a partial change: only the fields sent, never immutable ones.
	Update
)

// IsPolymorphic reports whether items of s come in several types.
func (s Schema) IsPolymorphic() bool { return len(s.Polymorphic) > 0 }

// Variants returns the discriminator values of a polymorphic schema, sorted.
func (s Schema) Variants() []string {
	return slices.Sorted(maps.Keys(s.Polymorphic))
}

// Variant returns the plain schema of one type of a polymorphic schema: the shared
// fields, the discriminator (immutable, defaulting to and only matching typ) and that
// type's own fields. Use it to check an update against the stored item's type and to
// render that item's update template. ok is false when typ is not a variant.
func (s Schema) Variant(typ string) (v Schema, ok bool) {
	own, ok := s.Polymorphic[typ]
	if !ok {
		return Schema{}, false
	}
	disc := s.discriminator()
	disc.Immutable = true
	disc.Default = typ
	disc.Regex = regexp.QuoteMeta(typ)
	fields := make([]Field, 0, len(s.Fields)+len(own)+1)
	fields = append(fields, disc)
	for _, f := range s.Fields {
		if f.Name != Discriminator {
			fields = append(fields, f)
		}
	}
	fields = append(fields, own...)
	return Schema{Type: s.Type, Fields: fields}, true
}

// discriminator returns the declared Discriminator field or the implied one.
func (s Schema) discriminator() Field {
	for _, f := range s.Fields {
		if f.Name == Discriminator {
			return f
		}
	}
	return Field{Name: Discriminator, Prompt: "Type", Type: TypeString, Required: true, Immutable: true}
}

// baseFields returns the shared fields, with the Discriminator first if implied.
func (s Schema) baseFields() []Field {
	if !s.IsPolymorphic() || slices.ContainsFunc(s.Fields, func(f Field) bool { return f.Name == Discriminator }) {
		return s.Fields
	}
	return append([]Field{s.discriminator()}, s.Fields...)
}

// fieldsFor returns the fields of items of type typ. For an unknown type of a
// polymorphic schema it returns every field any type has (the first declaration of a
// name wins), so that nothing sent is reported as unknown only because the type was
// wrong.
func (s Schema) fieldsFor(typ string) []Field {
	if !s.IsPolymorphic() {
		return s.Fields
	}
	fields := slices.Clone(s.baseFields())
	if own, ok := s.Polymorphic[typ]; ok {
		return append(fields, own...)
	}
	for _, v := range s.Variants() {
		for _, f := range s.Polymorphic[v] {
			if !slices.ContainsFunc(fields, func(g Field) bool { return g.Name == f.Name }) {
				fields = append(fields, f)
			}
		}
	}
	return fields
}

// Validate reports mistakes in the schema itself: empty or repeated names, unknown
// types, regexes Go cannot compile, defaults of the wrong type. ParseWrite cannot tell
// such mistakes from bad input, so call Validate once for each schema, e.g. in a test.
func (s Schema) Validate() error {
	var errs []error
	// check reports the mistakes of fields, whose names must not repeat each other
	// or the names in taken.
	check := func(where string, fields []Field, taken map[string]bool) {
		seen := maps.Clone(taken)
		if seen == nil {
			seen = map[string]bool{}
		}
		for _, f := range fields {
			switch {
			case f.Name == "":
				errs = append(errs, fmt.Errorf("%s: field with empty name", where))
				continue
			case seen[f.Name]:
				errs = append(errs, fmt.Errorf("%s: field %q declared twice", where, f.Name))
			}
			seen[f.Name] = true
			if !knownType(f.Type) {
				errs = append(errs, fmt.Errorf("%s: field %q: unknown type %q", where, f.Name, f.Type))
			}
			if f.Regex != "" {
				if _, err := compileFieldRegex(f.Regex); err != nil {
					errs = append(errs, fmt.Errorf("%s: field %q: %w", where, f.Name, err))
				}
			}
			if f.Default != nil {
				if _, msg := checkValue(f, f.Default); msg != "" {
					errs = append(errs, fmt.Errorf("%s: field %q: default %s", where, f.Name, msg))
				}
			}
		}
	}
	base := s.baseFields()
	check(s.Type, base, nil)
	if !s.IsPolymorphic() {
		return errors.Join(errs...)
	}
	baseNames := map[string]bool{}
	for _, f := range base {
		baseNames[f.Name] = true
	}
	disc := s.discriminator()
	if disc.Type != TypeString {
		errs = append(errs, fmt.Errorf("%s: field %q must be a string to select types", s.Type, Discriminator))
	}
	for _, v := range s.Variants() {
		if _, msg := checkValue(disc, v); msg != "" {
			errs = append(errs, fmt.Errorf("%s: type %q: %s", s.Type, v, msg))
		}
		check(s.Type+"/"+v, s.Polymorphic[v], baseNames)
	}
	return errors.Join(errs...)
}

func knownType(t string) bool {
	switch t {
	case "", TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeList, TypeObject:
		return true
	}
	return false
}

// compileFieldRegex compiles a field's regex with whole-value matching, as Cerberus
// (behind Eve) and HTML's pattern attribute do, after reading Python's \Z as Go's \z.
func compileFieldRegex(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`\A(?:` + translatePythonRegex(pattern) + `)\z`)
}

// translatePythonRegex rewrites the one Python escape the spec uses that RE2 lacks:
// \Z (end of text) becomes \z. An escaped backslash (\\Z) is left alone.
func translatePythonRegex(p string) string {
	if !strings.Contains(p, `\Z`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			if p[i+1] == 'Z' {
				b.WriteString(`\z`)
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// CreateTemplate returns the template for creating an item: every field with its
// default as value, `required` on required fields and `regex` where set. For a
// polymorphic schema it holds only the shared fields; use CreateTemplates or
// Collection.SetCreateTemplate to offer one template per type.
func CreateTemplate(s Schema) Template {
	return Template{Data: templateData(s.baseFields(), Create)}
}

// CreateTemplates returns one named create template per type of a polymorphic schema,
// sorted by type, each with the discriminator's value filled in. It returns nil for a
// plain schema.
func CreateTemplates(s Schema) []Template {
	var ts []Template
	for _, v := range s.Variants() {
		vs, _ := s.Variant(v)
		data := templateData(vs.Fields, Create)
		// The variant's discriminator is immutable only for updates; on create it is
		// the one field the client must send, so it is marked required.
		data[0].Required = ptr(true)
		data[0].Regex = ""
		ts = append(ts, Template{Name: v, Data: data})
	}
	return ts
}

// UpdateTemplate returns the template for updating an item: the fields that may
// change (immutable ones are absent), none of them required. For a polymorphic schema
// pass s.Variant(type) to get the fields of the item's type; the polymorphic schema
// itself yields the fields of every type.
func UpdateTemplate(s Schema) Template {
	return Template{Data: templateData(s.fieldsFor(""), Update)}
}

// SetCreateTemplate sets c.Template, or c.Templates for a polymorphic schema, to what
// a client needs to create an item.
func (c *Collection) SetCreateTemplate(s Schema) {
	if s.IsPolymorphic() {
		c.Template, c.Templates = nil, CreateTemplates(s)
		return
	}
	t := CreateTemplate(s)
	c.Template, c.Templates = &t, nil
}

func templateData(fields []Field, mode Mode) []Data {
	data := make([]Data, 0, len(fields))
	for _, f := range fields {
		if mode == Update && f.Immutable {
			continue
		}
		value, _ := normalize(f.Default) // a copy, so no client of the template shares it
		d := Data{Name: f.Name, Prompt: f.Prompt, Value: value, Regex: f.Regex}
		if mode == Create && f.Required {
			d.Required = ptr(true)
		}
		data = append(data, d)
	}
	return data
}

func ptr[T any](v T) *T { return &v }
