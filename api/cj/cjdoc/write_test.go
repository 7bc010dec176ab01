package cjdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// body builds a write template from name/value pairs, keeping their order.
func body(pairs ...any) []byte {
	data := make([]map[string]any, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		data = append(data, map[string]any{"name": pairs[i], "value": pairs[i+1]})
	}
	b, err := json.Marshal(map[string]any{"template": map[string]any{"data": data}})
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseWriteCreate(t *testing.T) {
	t.Parallel()
	got, err := ParseWrite(body(
		"name", "s1", "owner", "ann",
		"templates", []any{3, 4},
		"exposers", []any{map[string]any{"name": "e1", "type": "nfs"}},
		"profile", map[string]any{"name": "gold", "level": 2},
		"quota", 10, "ratio", 1, "enabled", false, "extras", map[string]any{"k": 1.5},
	), spaceSchema, Create)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"name": "s1", "owner": "ann",
		"templates": []any{int64(3), int64(4)},
		"exposers":  []any{map[string]any{"name": "e1", "type": "nfs"}},
		"profile":   map[string]any{"name": "gold", "level": int64(2)},
		"quota":     int64(10), "ratio": 1.0, "enabled": false,
		"labels": []any{"a"}, // default
		"extras": map[string]any{"k": 1.5},
	}, got)

	// Defaults are copies: changing one result leaves the next untouched.
	got["labels"].([]any)[0] = "changed"
	again, err := ParseWrite(body("name", "s2", "owner", "ann"), spaceSchema, Create)
	require.NoError(t, err)
	require.Equal(t, []any{"a"}, again["labels"])
	require.Equal(t, true, again["enabled"])
}

func TestParseWriteAcceptedShapes(t *testing.T) {
	t.Parallel()
	for _, b := range []string{
		`{"template":{"data":[{"name":"name","value":"s1"},{"name":"owner","value":"a"}]}}`,
		`{"collection":{"version":"1.0","template":{"data":[{"name":"name","value":"s1"},{"name":"owner","value":"a"}]}}}`,
		" \n{\"template\":{\"data\":[{\"name\":\"name\",\"value\":\"s1\",\"prompt\":\"x\"},{\"name\":\"owner\",\"value\":\"a\"}]}}\n ",
	} {
		got, err := ParseWrite([]byte(b), spaceSchema, Create)
		require.NoError(t, err, b)
		require.Equal(t, "s1", got["name"])
	}
}

func TestParseWriteValidation(t *testing.T) {
	t.Parallel()
	ok := []any{"name", "s1", "owner", "ann"}
	with := func(pairs ...any) []byte { return body(append(append([]any{}, ok...), pairs...)...) }
	tests := []struct {
		name string
		body []byte
		mode Mode
		want []FieldError
	}{
		{"missing required", body("owner", "ann"), Create, []FieldError{{"name", "is required"}}},
		{"null required", body("name", nil, "owner", "ann"), Create, []FieldError{{"name", "is required"}}},
		{"all missing", body(), Create, []FieldError{{"name", "is required"}, {"owner", "is required"}}},
		{"regex mismatch", body("name", "bad name!", "owner", "ann"), Create, []FieldError{{"name", `must match ^[\w\-]+\Z`}}},
		{"regex trailing newline (\\Z)", body("name", "s1\n", "owner", "ann"), Create, []FieldError{{"name", `must match ^[\w\-]+\Z`}}},
		{"regex empty", body("name", "", "owner", "ann"), Create, []FieldError{{"name", `must match ^[\w\-]+\Z`}}},
		{"string type", body("name", 5, "owner", "ann"), Create, []FieldError{{"name", "must be a string"}}},
		{"list type", with("templates", "3"), Create, []FieldError{{"templates", "must be a list"}}},
		{"object type", with("profile", []any{1}), Create, []FieldError{{"profile", "must be an object"}}},
		{"integer type fraction", with("quota", 1.5), Create, []FieldError{{"quota", "must be an integer"}}},
		{"integer type string", with("quota", "3"), Create, []FieldError{{"quota", "must be an integer"}}},
		{"integer out of range", with("quota", 1e20), Create, []FieldError{{"quota", "is out of range"}}},
		{"number type", with("ratio", "x"), Create, []FieldError{{"ratio", "must be a number"}}},
		{"boolean type", with("enabled", "yes"), Create, []FieldError{{"enabled", "must be true or false"}}},
		{"unknown field", with("color", "red"), Create, []FieldError{{"color", "is not a field of this resource"}}},
		{"meta field is unknown", with("status", "ACTIVE"), Create, []FieldError{{"status", "is not a field of this resource"}}},
		{"duplicate", with("quota", 1, "quota", 2), Create, []FieldError{{"quota", "is given more than once"}}},
		{"duplicate required", body("name", "a", "name", "b", "owner", "x"), Create, []FieldError{{"name", "is given more than once"}}},
		{"every error listed", body("name", "x y", "quota", "q", "color", 1), Create, []FieldError{
			{"name", `must match ^[\w\-]+\Z`}, {"quota", "must be an integer"},
			{"color", "is not a field of this resource"}, {"owner", "is required"},
		}},
		{"update immutable", body("name", "s2"), Update, []FieldError{{"name", "cannot be changed"}}},
		{"update unknown", body("color", "red"), Update, []FieldError{{"color", "is not a field of this resource"}}},
		{"update type", body("quota", "x"), Update, []FieldError{{"quota", "must be an integer"}}},
		{"update clears required", body("owner", nil), Update, []FieldError{{"owner", "is required and cannot be cleared"}}},
		{"update duplicate", body("owner", "a", "owner", "a"), Update, []FieldError{{"owner", "is given more than once"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseWrite(tt.body, spaceSchema, tt.mode)
			require.Nil(t, got)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "want *ValidationError, got %T %v", err, err)
			require.Equal(t, tt.want, ve.Fields)
			cj := ve.CJError()
			require.Equal(t, CodeInvalidData, cj.Code)
			require.Equal(t, tt.want, cj.Fields)
		})
	}
}

func TestParseWriteNumbers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"3": 3, "3.0": 3, "1e3": 1000, "-0": 0, "9223372036854775807": 9223372036854775807} {
		b := fmt.Sprintf(`{"template":{"data":[{"name":"quota","value":%s}]}}`, in)
		got, err := ParseWrite([]byte(b), spaceSchema, Update)
		require.NoError(t, err, in)
		require.Equal(t, want, got["quota"], in)
	}
	for _, in := range []string{"9223372036854775808", "1e999", "-1e999"} {
		b := fmt.Sprintf(`{"template":{"data":[{"name":"quota","value":%s}]}}`, in)
		_, err := ParseWrite([]byte(b), spaceSchema, Update)
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), in)
		require.Equal(t, "is out of range", ve.Fields[0].Message, in)
	}
	b := `{"template":{"data":[{"name":"extras","value":{"deep":[1e999]}}]}}`
	_, err := ParseWrite([]byte(b), spaceSchema, Update)
	var ve *ValidationError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, []FieldError{{"extras", "holds a number out of range"}}, ve.Fields)
}

func TestParseWriteUpdate(t *testing.T) {
	t.Parallel()
	got, err := ParseWrite(body("templates", []any{5}, "comment", nil), spaceSchema, Update)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"templates": []any{int64(5)}, "comment": nil}, got,
		"only the fields sent; null clears an optional field; no defaults")

	got, err = ParseWrite(body(), spaceSchema, Update)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestParseWriteMalformed(t *testing.T) {
	t.Parallel()
	for _, b := range []string{
		``, ` `, `{`, `nul`, `null`, `[]`, `"x"`, `{"x":1}`,
		`{"template":1}`, `{"template":null}`, `{"template":{}}`, `{"template":{"data":{}}}`,
		`{"template":{"data":null}}`, `{"template":{"data":[1]}}`, `{"template":{"data":[{"value":1}]}}`,
		`{"template":{"data":[{"name":""}]}}`, `{"template":{"data":[{"name":3}]}}`,
		`{"template":{"data":[]}} trailing`, `{"template":{"data":[]}}{}`,
		`{"collection":{}}`, `{"collection":[]}`, `{"collection":{"template":[]}}`,
	} {
		got, err := ParseWrite([]byte(b), spaceSchema, Create)
		require.Nil(t, got, b)
		var be *BodyError
		require.True(t, errors.As(err, &be), "%q: want *BodyError, got %T %v", b, err, err)
		require.Equal(t, CodeMalformedBody, be.CJError().Code)
	}
}

func TestParseWritePolymorphic(t *testing.T) {
	t.Parallel()
	got, err := ParseWrite(body("type", "nfs", "name", "e1", "clients", []any{"10.0.0.0/8"}), exposerSchema, Create)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"type": "nfs", "name": "e1", "clients": []any{"10.0.0.0/8"}}, got)

	got, err = ParseWrite(body("type", "gpfsnative", "name", "e2"), exposerSchema, Create)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"type": "gpfsnative", "name": "e2"}, got)

	tests := []struct {
		name string
		body []byte
		mode Mode
		s    Schema
		want []FieldError
	}{
		{"type missing", body("name", "e1"), Create, exposerSchema, []FieldError{{"type", "is required"}}},
		{"type unknown", body("type", "zfs", "name", "e1", "share", "x"), Create, exposerSchema,
			[]FieldError{{"type", "must be one of: cifs, gpfsnative, nfs"}}},
		{"type not a string", body("type", 1, "name", "e1"), Create, exposerSchema, []FieldError{{"type", "must be a string"}}},
		{"variant required", body("type", "cifs", "name", "e1"), Create, exposerSchema, []FieldError{{"share", "is required"}}},
		{"other variant's field", body("type", "nfs", "name", "e1", "share", "x"), Create, exposerSchema,
			[]FieldError{{"share", "is not a field of this resource"}}},
		{"update type", body("type", "cifs"), Update, exposerSchema, []FieldError{{"type", "cannot be changed"}}},
		{"update variant type", body("type", "cifs"), Update, variant(t, "nfs"), []FieldError{{"type", "cannot be changed"}}},
		{"update variant other field", body("share", "x"), Update, variant(t, "nfs"), []FieldError{{"share", "is not a field of this resource"}}},
	}
	for _, tt := range tests {
		got, err := ParseWrite(tt.body, tt.s, tt.mode)
		require.Nil(t, got, tt.name)
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", tt.name, err)
		require.Equal(t, tt.want, ve.Fields, tt.name)
	}

	got, err = ParseWrite(body("clients", []any{}, "name", "e9"), variant(t, "nfs"), Update)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"clients": []any{}, "name": "e9"}, got)
}

func variant(t *testing.T, typ string) Schema {
	t.Helper()
	v, ok := exposerSchema.Variant(typ)
	require.True(t, ok)
	return v
}

func TestValidationErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := ParseWrite(body("quota", "x"), spaceSchema, Create)
	require.EqualError(t, err, "invalid data: quota must be an integer; name is required; owner is required")
}

func TestSchemaValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, spaceSchema.Validate())
	require.NoError(t, exposerSchema.Validate())

	bad := Schema{Type: "bad", Fields: []Field{
		{Name: ""},
		{Name: "a", Type: "text"},
		{Name: "a"},
		{Name: "r", Type: TypeString, Regex: `(?<=x)`},
		{Name: "d", Type: TypeInteger, Default: "seven"},
	}}
	err := bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"empty name", `unknown type "text"`, `"a" declared twice`, `field "r"`, `field "d": default must be an integer`} {
		require.Contains(t, err.Error(), want)
	}

	poly := Schema{Type: "p", Fields: []Field{{Name: "type", Type: TypeInteger}}, Polymorphic: map[string][]Field{"x": nil}}
	require.ErrorContains(t, poly.Validate(), "must be a string")
	clash := Schema{Type: "p", Fields: []Field{{Name: "name"}}, Polymorphic: map[string][]Field{"x": {{Name: "name"}}}}
	require.ErrorContains(t, clash.Validate(), `p/x: field "name" declared twice`)

	// A schema mistake is refused at write time rather than stored unchecked.
	_, werr := ParseWrite(body("r", "x"), bad, Update)
	require.ErrorContains(t, werr, "pattern for it is invalid")
}

func TestTranslatePythonRegex(t *testing.T) {
	t.Parallel()
	require.Equal(t, `^[\w\-]+\z`, translatePythonRegex(`^[\w\-]+\Z`))
	require.Equal(t, `a\\Z`, translatePythonRegex(`a\\Z`), "an escaped backslash stays")
	require.Equal(t, `\d\z\z`, translatePythonRegex(`\d\Z\Z`))
	require.Equal(t, `trailing\`, translatePythonRegex(`trailing\`))
	require.Equal(t, `\A\zx\z`, translatePythonRegex(`\A\zx\Z`))
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	tr := ptr(true)
	create := CreateTemplate(spaceSchema)
	require.Empty(t, create.Name)
	require.Equal(t, Data{Name: "name", Prompt: "Name", Required: tr, Regex: `^[\w\-]+\Z`}, create.Data[0])
	require.Equal(t, Data{Name: "owner", Prompt: "Owner", Required: tr}, create.Data[1])
	require.Equal(t, Data{Name: "enabled", Prompt: "Enabled", Value: true}, create.Data[7])
	require.Len(t, create.Data, len(spaceSchema.Fields))

	update := UpdateTemplate(spaceSchema)
	var names []string
	for _, d := range update.Data {
		require.Nil(t, d.Required, "nothing is required in an update")
		names = append(names, d.Name)
	}
	require.Equal(t, []string{"owner", "templates", "exposers", "profile", "quota", "ratio", "enabled", "labels", "comment", "extras"}, names)

	ts := CreateTemplates(exposerSchema)
	require.Len(t, ts, 3)
	require.Equal(t, []string{"cifs", "gpfsnative", "nfs"}, []string{ts[0].Name, ts[1].Name, ts[2].Name})
	require.Equal(t, []Data{
		{Name: "type", Prompt: "Type", Value: "cifs", Required: tr},
		{Name: "name", Prompt: "Name", Required: tr, Regex: `^[\w\-]+\Z`},
		{Name: "comment", Prompt: "Comment"},
		{Name: "share", Prompt: "Share", Required: tr},
	}, ts[0].Data)
	require.Nil(t, CreateTemplates(spaceSchema))

	nfsUpdate := UpdateTemplate(variant(t, "nfs"))
	require.Equal(t, []Data{
		{Name: "name", Prompt: "Name", Regex: `^[\w\-]+\Z`},
		{Name: "comment", Prompt: "Comment"},
		{Name: "clients", Prompt: "Clients"},
	}, nfsUpdate.Data)

	var c Collection
	c.SetCreateTemplate(spaceSchema)
	require.NotNil(t, c.Template)
	require.Nil(t, c.Templates)
	c.SetCreateTemplate(exposerSchema)
	require.Nil(t, c.Template)
	require.Len(t, c.Templates, 3)

	// A template round-trips: filling it in makes a valid create body.
	var data []string
	for _, d := range CreateTemplates(exposerSchema)[2].Data {
		v := d.Value
		if v == nil {
			v = "x1"
		}
		enc, _ := json.Marshal(map[string]any{"name": d.Name, "value": v})
		data = append(data, string(enc))
	}
	data = data[:2] // type and name
	_, err := ParseWrite([]byte(`{"template":{"data":[`+strings.Join(data, ",")+`]}}`), exposerSchema, Create)
	require.NoError(t, err)
}

func TestParseWriteTypedDefaults(t *testing.T) {
	t.Parallel()
	// Defaults written as Go values are stored as JSON-shaped copies.
	s := Schema{Fields: []Field{
		{Name: "tags", Type: TypeList, Default: []string{"x"}},
		{Name: "limits", Type: TypeObject, Default: map[string]int{"files": 10}},
		{Name: "level", Type: TypeInteger, Default: 3},
	}}
	require.NoError(t, s.Validate())
	got, err := ParseWrite(body(), s, Create)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"tags": []any{"x"}, "limits": map[string]any{"files": int64(10)}, "level": int64(3)}, got)

	bad := Schema{Fields: []Field{{Name: "n", Type: TypeNumber, Default: math.NaN()}}}
	require.ErrorContains(t, bad.Validate(), "default is out of range")
	_, err = ParseWrite(body(), bad, Create)
	require.ErrorContains(t, err, "n cannot be defaulted")
}

func TestParseUpdateAcceptsUnchangedImmutable(t *testing.T) {
	t.Parallel()
	current := map[string]any{"name": "s1", "owner": "ann"}
	got, err := ParseUpdate(body("name", "s1"), spaceSchema, current)
	require.NoError(t, err)
	require.Empty(t, got, "an unchanged immutable field is no change")
	_, err = ParseUpdate(body("name", "s2"), spaceSchema, current)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []FieldError{{"name", "cannot be changed"}}, ve.Fields)
}
