package hub

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// The schemas of the OpenAPI document are generated from the Go types the
// handlers bind and answer, by reflection, with encoding/json's rules:
// what a type marshals to is what the document says it is.
//
//   - A struct is an object with one property per JSON field (embedded
//     structs flattened); a named struct becomes a component, named after
//     its type without a "Response" suffix (jobResponse: Job).
//   - In a response every field is required unless its tag says omitempty:
//     use omitempty only for a field that is really left out sometimes.
//     In a request body nothing is required (PATCH takes any subset, and
//     the handler says what a create needs), and components get an
//     "Input" suffix.
//   - Pointers, interfaces and json.RawMessage are nullable; slices and
//     maps are not, since the renders never leave them nil, unless the
//     field's tag says nullable:"true".
//   - enum:"name" gives the values of enums[name]; doc:"..." describes the
//     field.
//
// Components named by models types (Configuration, WorkflowField) follow
// those types as they change; enums of their fields are in modelEnums.

// enums are the closed sets of values of string fields, by the name an
// enum tag gives them.
var enums = map[string][]string{
	"job_state":        models.JobStates,
	"task_state":       models.TaskStates,
	"path_state":       models.PathStates,
	"action_state":     {vocab.ActionPending, vocab.ActionStarted, vocab.ActionSuccess, vocab.ActionFailure},
	"alert_severity":   models.AlertSeverities,
	"health":           {healthOK, healthWarning, healthCritical},
	"owner_type":       {models.OwnerUser, models.OwnerSystem, models.OwnerUnknown},
	"discovery":        {models.DiscoveryRecursive, models.DiscoverySnapdiff},
	"job_discovery":    {models.DiscoveryRecursive, models.DiscoverySnapdiff, models.DiscoveryPolicy},
	"space_site_state": {vocab.SpaceSitePending, vocab.SpaceSiteReady, vocab.SpaceSiteError},
	"share_type":       {site.ShareNFS, site.ShareSMB},
	"setting_scope":    {settingScopeGlobal, settingScopeSite},
	"settings_task":    {models.SettingsTaskApply, models.SettingsTaskRefresh},
	"addon":            {addonEnabled, addonDisabled},
	"file_type":        {site.TypeFile, site.TypeDirectory, site.TypeSymlink},
}

// modelEnums are the enums of fields of models types, which carry no tags
// of the API's: by type, then JSON field name.
var modelEnums = map[reflect.Type]map[string][]string{
	reflect.TypeFor[models.Configuration](): {"search_backend": searchBackends, "db_backup_type": dbBackupTypes,
		"filebrowser_proxies_backend": proxiesBackends},
	reflect.TypeFor[models.WorkflowField](): {"type": models.FieldTypes},
	reflect.TypeFor[models.FilterRule]():    {"type": models.RuleTypes, "state": models.RuleStates},
	reflect.TypeFor[models.JobOwner]():      {"type": enums["owner_type"]},
}

// schemaValuer is implemented by request wrappers, like nullable, whose
// JSON is that of another type.
type schemaValuer interface{ SchemaType() reflect.Type }

// anyOf documents a body that takes one of several shapes: a value of each
// shape's type.
type anyOf []any

var (
	timeType       = reflect.TypeFor[time.Time]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	anyOfType      = reflect.TypeFor[anyOf]()
)

// schemaGen generates schemas into the components of one document.
type schemaGen struct {
	schemas openapi3.Schemas
	names   map[schemaKey]string
	types   map[string]schemaKey // the type each component name was given to
}

type schemaKey struct {
	t       reflect.Type
	request bool
}

func newSchemaGen() *schemaGen {
	return &schemaGen{schemas: openapi3.Schemas{}, names: map[schemaKey]string{}, types: map[string]schemaKey{}}
}

// response returns the schema of a response body of v's type; an anyOf
// value gives a schema matching any of its elements' types.
func (g *schemaGen) response(v any) *openapi3.SchemaRef {
	if alts, ok := v.(anyOf); ok {
		s := &openapi3.Schema{}
		for _, a := range alts {
			s.AnyOf = append(s.AnyOf, g.response(a))
		}
		return openapi3.NewSchemaRef("", s)
	}
	return g.ref(reflect.TypeOf(v), false)
}

// request returns the schema of a request body of v's type.
func (g *schemaGen) request(v any) *openapi3.SchemaRef { return g.ref(reflect.TypeOf(v), true) }

func (g *schemaGen) ref(t reflect.Type, request bool) *openapi3.SchemaRef {
	if sv, ok := reflect.Zero(t).Interface().(schemaValuer); ok {
		return nullableRef(g.ref(sv.SchemaType(), request))
	}
	switch t {
	case timeType:
		return inline(openapi3.NewDateTimeSchema())
	case rawMessageType:
		return inline(&openapi3.Schema{Nullable: true})
	case anyOfType:
		panic("anyOf is for whole bodies only")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullableRef(g.ref(t.Elem(), request))
	case reflect.Interface:
		return inline(&openapi3.Schema{Nullable: true})
	case reflect.Bool:
		return inline(openapi3.NewBoolSchema())
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return inline(openapi3.NewInt64Schema())
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return inline(openapi3.NewInt32Schema())
	case reflect.Float32, reflect.Float64:
		return inline(openapi3.NewFloat64Schema())
	case reflect.String:
		return inline(openapi3.NewStringSchema())
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return inline(openapi3.NewBytesSchema())
		}
		s := openapi3.NewArraySchema()
		s.Items = g.ref(t.Elem(), request)
		return inline(s)
	case reflect.Map:
		s := openapi3.NewObjectSchema()
		s.AdditionalProperties = openapi3.AdditionalProperties{Schema: g.ref(t.Elem(), request)}
		return inline(s)
	case reflect.Struct:
		if t.Name() == "" {
			return inline(g.object(t, request))
		}
		return g.component(t, request)
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

// component returns a reference to the component of the named struct t,
// generating it the first time.
func (g *schemaGen) component(t reflect.Type, request bool) *openapi3.SchemaRef {
	key := schemaKey{t, request}
	name, ok := g.names[key]
	if !ok {
		name = g.componentName(key)
		g.names[key] = name
		g.types[name] = key
		g.schemas[name] = inline(&openapi3.Schema{}) // a placeholder, should t refer to itself
		*g.schemas[name].Value = *g.object(t, request)
	}
	return openapi3.NewSchemaRef("#/components/schemas/"+name, g.schemas[name].Value)
}

// componentName names t's component: jobResponse gives Job, a request
// body's type gets an Input suffix, and a name already given to another
// type is qualified by the package (ModelsJob).
func (g *schemaGen) componentName(key schemaKey) string {
	name := strings.TrimSuffix(key.t.Name(), "Response")
	if key.request && !strings.HasSuffix(name, "Input") {
		name += "Input"
	}
	name = upperFirst(name)
	if _, taken := g.types[name]; taken {
		pkg := key.t.PkgPath()
		name = upperFirst(pkg[strings.LastIndex(pkg, "/")+1:]) + name
	}
	if _, taken := g.types[name]; taken {
		panic(fmt.Sprintf("openapi: two types named %s", name))
	}
	return name
}

func upperFirst(s string) string {
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// object is the object schema of struct t.
func (g *schemaGen) object(t reflect.Type, request bool) *openapi3.Schema {
	s := openapi3.NewObjectSchema()
	s.Properties = openapi3.Schemas{}
	for _, f := range jsonFields(t) {
		p := g.ref(f.Type, request)
		values := modelEnums[t][f.name]
		if name := f.Tag.Get("enum"); name != "" {
			var ok bool
			if values, ok = enums[name]; !ok {
				panic(fmt.Sprintf("openapi: %v.%s: no enum %q", t, f.Name, name))
			}
		}
		if values != nil {
			p = withEnum(p, values)
		}
		if f.Tag.Get("nullable") == "true" {
			p = nullableRef(p)
		}
		if doc := f.Tag.Get("doc"); doc != "" {
			p = described(p, doc)
		}
		s.Properties[f.name] = p
		if !request && !f.omitEmpty {
			s.Required = append(s.Required, f.name)
		}
	}
	return s
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	reflect.StructField
	name      string
	omitEmpty bool
	depth     int
}

// jsonFields lists the fields encoding/json marshals for struct t, in
// order, embedded structs flattened; of fields of the same name the
// shallowest wins.
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			all = append(all, jsonField{StructField: f, name: name, omitEmpty: strings.Contains(opts, "omitempty"), depth: depth})
		}
	}
	walk(t, 0)
	shallowest := map[string]int{}
	for _, f := range all {
		if d, ok := shallowest[f.name]; !ok || f.depth < d {
			shallowest[f.name] = f.depth
		}
	}
	var out []jsonField
	for _, f := range all {
		if f.depth == shallowest[f.name] {
			out = append(out, f)
		}
	}
	return out
}

func inline(s *openapi3.Schema) *openapi3.SchemaRef { return openapi3.NewSchemaRef("", s) }

// nullableRef allows null besides what ref allows. A reference cannot
// carry nullable itself in OpenAPI 3.0, so it is wrapped in an allOf.
func nullableRef(ref *openapi3.SchemaRef) *openapi3.SchemaRef {
	if ref.Ref != "" {
		return inline(&openapi3.Schema{AllOf: openapi3.SchemaRefs{ref}, Nullable: true})
	}
	s := *ref.Value
	s.Nullable = true
	return inline(&s)
}

// withEnum restricts a string schema, or the items of an array of them,
// to values.
func withEnum(ref *openapi3.SchemaRef, values []string) *openapi3.SchemaRef {
	s := *ref.Value
	if s.Type.Is(openapi3.TypeArray) {
		s.Items = withEnum(s.Items, values)
		return inline(&s)
	}
	s.Enum = make([]any, len(values))
	for i, v := range values {
		s.Enum[i] = v
	}
	if s.Nullable {
		s.Enum = append(s.Enum, nil) // null is a value too
	}
	return inline(&s)
}

func described(ref *openapi3.SchemaRef, doc string) *openapi3.SchemaRef {
	if ref.Ref != "" {
		ref = inline(&openapi3.Schema{AllOf: openapi3.SchemaRefs{ref}})
	}
	s := *ref.Value
	s.Description = doc
	return inline(&s)
}
