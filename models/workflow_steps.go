package models

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ParamType is the JSON type of a workflow step parameter.
type ParamType string

// Parameter types.
const (
	ParamString ParamType = "string"
	ParamBool   ParamType = "bool"
	ParamInt    ParamType = "integer"
)

// StepParam describes one parameter of a workflow step.
type StepParam struct {
	Name     string
	Type     ParamType
	Required bool
	// Min is the smallest accepted value of an integer parameter.
	Min int64
	// Enum, when set, lists the accepted values of a string parameter.
	Enum []string
	// Path: a string parameter naming a path of a site ("" for its
	// default), checked as job paths are (SitePathError).
	Path bool
	Doc  string
}

// SitePathError says what is wrong with p as a path inside a site root
// (absolute, no ".." element, no NUL), or "".
func SitePathError(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "Paths are absolute inside the site root and start with /."
	case strings.ContainsRune(p, 0) || slices.Contains(strings.Split(p, "/"), ".."):
		return "Paths may not contain .. or NUL."
	}
	return ""
}

// WorkflowStep is one step of the vocabulary that filter rules chain. The
// jobs engine implements exactly these steps; the API validates
// definitions against the same table, so the two cannot drift apart.
type WorkflowStep struct {
	Name   string
	Doc    string
	Params []StepParam
}

// Param returns the named parameter of the step.
func (s WorkflowStep) Param(name string) (StepParam, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return StepParam{}, false
}

// Step names.
const (
	StepPremigrate  = "premigrate"
	StepMigrate     = "migrate"
	StepRecall      = "recall"
	StepSend        = "send"
	StepSiteSync    = "site_sync"
	StepDelete      = "delete"
	StepReverseStub = "reverse_stub"
)

// WorkflowSteps is the step vocabulary, in documentation order.
var WorkflowSteps = []WorkflowStep{
	{Name: StepPremigrate, Doc: "Copy file data to an external target; the file stays resident locally (premigrated).",
		Params: []StepParam{
			{Name: "target", Type: ParamString, Doc: "External target name; default: the site's default target."},
			{Name: "overwrite", Type: ParamBool, Doc: "Upload again even when the target already holds the data."},
		}},
	{Name: StepMigrate, Doc: "Copy file data to an external target and replace the local data with a stub.",
		Params: []StepParam{
			{Name: "target", Type: ParamString, Doc: "External target name; default: the site's default target."},
			{Name: "overwrite", Type: ParamBool, Doc: "Upload again even when the target already holds the data."},
			{Name: "stub_size", Type: ParamInt, Min: 0, Doc: "Leading bytes the stub keeps locally."},
			{Name: "premigrate", Type: ParamBool, Doc: "Only premigrate files that are resident, release them in a later run."},
		}},
	{Name: StepRecall, Doc: "Bring migrated file data back from the external target.",
		Params: []StepParam{
			{Name: "delete_on_recall", Type: ParamBool, Doc: "Delete the remote copy once the data is back."},
		}},
	{Name: StepSend, Doc: "Copy files to another site.",
		Params: []StepParam{
			{Name: "destination_site", Type: ParamString, Required: true, Doc: "Name of the receiving site."},
			{Name: "destination_queue", Type: ParamString, Doc: "Queue of the receiving site; default: default."},
			{Name: "destination_path", Type: ParamString, Path: true, Doc: "Folder at the receiving site; default: the same path."},
			{Name: "hydrate", Type: ParamBool, Doc: "Write full data at the destination even for migrated files."},
		}},
	{Name: StepSiteSync, Doc: "Keep files in step with another site.",
		Params: []StepParam{
			{Name: "destination_site", Type: ParamString, Required: true, Doc: "Name of the other site."},
			{Name: "destination_queue", Type: ParamString, Doc: "Queue of the other site; default: default."},
			{Name: "destination_path", Type: ParamString, Path: true, Doc: "Folder at the other site; default: the same path."},
			{Name: "sync_preference", Type: ParamString, Enum: []string{"newest", "local", "ignore"},
				Doc: "Which side wins when both changed: newest, local, or ignore (leave conflicts)."},
		}},
	{Name: StepDelete, Doc: "Delete files at the site.",
		Params: []StepParam{
			{Name: "remote", Type: ParamBool, Doc: "Also delete the remote copies on external targets."},
		}},
	{Name: StepReverseStub, Doc: "Recall a migrated file and forget its remote copy, leaving a plain resident file."},
}

// LookupWorkflowStep returns the step of the vocabulary with this name.
func LookupWorkflowStep(name string) (WorkflowStep, bool) {
	for _, s := range WorkflowSteps {
		if s.Name == name {
			return s, true
		}
	}
	return WorkflowStep{}, false
}

// Filter rule values.
var (
	RuleTypes  = []string{"all", "file", "directory", "symlink"}
	RuleStates = []string{"any", "resident", "premigrated", "migrated"}
)

// Runtime field types of a workflow definition.
const (
	FieldText     = "text"
	FieldNumber   = "number"
	FieldCheckbox = "checkbox"
	FieldChoice   = "choice"
)

// FieldTypes lists the runtime field types.
var FieldTypes = []string{FieldText, FieldNumber, FieldCheckbox, FieldChoice}

// fieldRef returns the runtime field a parameter value references ("$name").
func wfFieldRef(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "$") {
		return "", false
	}
	return s[1:], true
}

// paramAcceptsField tells which runtime field types can feed a parameter.
func wfParamAcceptsField(p StepParam, fieldType string) bool {
	switch p.Type {
	case ParamBool:
		return fieldType == FieldCheckbox
	case ParamInt:
		return fieldType == FieldNumber
	}
	return fieldType == FieldText || fieldType == FieldChoice
}

// asInt64 reports the integer value of a JSON number however it was
// decoded (json.Number from the API, float64 from storage).
func wfInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), n == float64(int64(n))
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

func wfIsNumber(v any) bool {
	switch v.(type) {
	case json.Number, float64, int, int64:
		return true
	}
	return false
}

// checkParam validates one literal parameter value.
func wfCheckParam(p StepParam, v any) string {
	switch p.Type {
	case ParamBool:
		if _, ok := v.(bool); !ok {
			return "Must be a boolean."
		}
	case ParamInt:
		n, ok := wfInt64(v)
		if !ok {
			return "Must be an integer."
		}
		if n < p.Min {
			return fmt.Sprintf("Must be greater than or equal to %d.", p.Min)
		}
	case ParamString:
		s, ok := v.(string)
		if !ok {
			return "Must be a string."
		}
		if p.Enum != nil && !slices.Contains(p.Enum, s) {
			return "Must be one of: " + strings.Join(p.Enum, ", ") + "."
		}
		if p.Required && s == "" {
			return "This field may not be blank."
		}
		if p.Path && s != "" {
			return SitePathError(s)
		}
	}
	return ""
}

// ResolveStepParams returns a step's parameters with every "$field"
// reference replaced by the job's value of that runtime field (or the
// field's default when the job has none); references left unresolved are
// dropped, so the step uses its own default.
func ResolveStepParams(step StepSpec, fields map[string]WorkflowField, values map[string]any) map[string]any {
	out := make(map[string]any, len(step.Params))
	for k, v := range step.Params {
		name, ok := wfFieldRef(v)
		if !ok {
			out[k] = v
			continue
		}
		if val, ok := values[name]; ok && val != nil {
			out[k] = val
		} else if f, ok := fields[name]; ok && f.Default != nil {
			out[k] = f.Default
		}
	}
	return out
}
