package models

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// Discovery methods of a workflow definition; none is a nil Discovery.
const (
	DiscoveryRecursive = "recursive"
	DiscoverySnapdiff  = "snapdiff"
	DiscoveryPolicy    = "policy" // a policy's scan on the site (models.PolicyRun)
)

// WorkflowField is a typed runtime field a job of the workflow is given.
type WorkflowField struct {
	Type     string `json:"type"`
	Label    string `json:"label"`
	Required bool   `json:"required"`
	Default  any    `json:"default"`
	Choices  []any  `json:"choices,omitempty"`
}

// Workflow is a workflow definition: how paths are discovered and the
// ordered filter rules whose action chains the jobs engine runs.
type Workflow struct {
	bun.BaseModel `bun:"table:workflows,alias:w"`

	ID               int64                    `bun:"id,pk,autoincrement"`
	Name             string                   `bun:"name"`
	Label            string                   `bun:"label"`
	Discovery        *string                  `bun:"discovery"`
	DiscoveryOptions map[string]any           `bun:"discovery_options,type:jsonb"`
	Fields           map[string]WorkflowField `bun:"fields,type:jsonb"`
	FilterRules      []FilterRule             `bun:"filter_rules,type:jsonb"`
	IconClasses      any                      `bun:"icon_classes,type:jsonb"`
	Enabled          bool                     `bun:"enabled"`
	Visible          bool                     `bun:"visible"`
	ScheduleOnly     bool                     `bun:"schedule_only"`
	ExternalOnly     bool                     `bun:"external_only"`
	PreferredQueue   string                   `bun:"preferred_queue"`
	Builtin          bool                     `bun:"builtin"`
	CreatedAt        time.Time                `bun:"created_at"`
	UpdatedAt        time.Time                `bun:"updated_at"`
}

// NamePattern is the pattern of workflow, queue and site names.
var NamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// fieldNamePattern keeps runtime field names usable as "$name" references.
var fieldNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// sortedKeys returns m's keys in order: validation messages and stored
// values must not depend on map iteration order.
func wfSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func wfCheckKeys(errs FieldErrors, path string, obj map[string]any, allowed ...string) {
	for _, k := range wfSortedKeys(obj) {
		if !slices.Contains(allowed, k) {
			errs.Add(path+"."+k, "Unknown key; expected one of: "+strings.Join(allowed, ", ")+".")
		}
	}
}

// ParseWorkflowFields validates the runtime fields of a definition (a JSON
// object decoded into raw; nil means none) and returns them typed.
func ParseWorkflowFields(raw any) (map[string]WorkflowField, FieldErrors) {
	errs := FieldErrors{}
	out := map[string]WorkflowField{}
	if raw == nil {
		return out, errs
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		errs.Add("fields", "Must be an object mapping field names to field definitions.")
		return out, errs
	}
	for _, name := range wfSortedKeys(obj) {
		path := "fields." + name
		if !fieldNamePattern.MatchString(name) {
			errs.Add(path, "Field names must match [a-zA-Z_][a-zA-Z0-9_]*.")
			continue
		}
		def, ok := obj[name].(map[string]any)
		if !ok {
			errs.Add(path, "Must be an object.")
			continue
		}
		wfCheckKeys(errs, path, def, "type", "label", "required", "default", "choices")
		var f WorkflowField
		f.Type, _ = def["type"].(string)
		if !slices.Contains(FieldTypes, f.Type) {
			errs.Add(path+".type", "Must be one of: "+strings.Join(FieldTypes, ", ")+".")
		}
		f.Label, _ = def["label"].(string)
		if f.Label == "" {
			errs.Add(path+".label", "This field is required.")
		}
		if r, present := def["required"]; present && r != nil {
			if f.Required, ok = r.(bool); !ok {
				errs.Add(path+".required", "Must be a boolean.")
			}
		}
		if c, present := def["choices"]; present && c != nil {
			list, ok := c.([]any)
			switch {
			case f.Type != FieldChoice:
				errs.Add(path+".choices", "Only choice fields have choices.")
			case !ok:
				errs.Add(path+".choices", "Must be a list.")
			default:
				for i, v := range list {
					if _, isStr := v.(string); !isStr && !wfIsNumber(v) {
						errs.Add(fmt.Sprintf("%s.choices[%d]", path, i), "Must be a string or a number.")
					}
				}
				f.Choices = list
			}
		}
		if f.Type == FieldChoice && len(f.Choices) == 0 {
			errs.Add(path+".choices", "Choice fields need a non-empty list of choices.")
		}
		f.Default = def["default"]
		if msg := wfCheckDefault(f); msg != "" {
			errs.Add(path+".default", msg)
		}
		out[name] = f
	}
	return out, errs
}

func wfCheckDefault(f WorkflowField) string {
	if f.Default == nil {
		return ""
	}
	switch f.Type {
	case FieldText:
		if _, ok := f.Default.(string); !ok {
			return "Must be a string."
		}
	case FieldNumber:
		if !wfIsNumber(f.Default) {
			return "Must be a number."
		}
	case FieldCheckbox:
		if _, ok := f.Default.(bool); !ok {
			return "Must be a boolean."
		}
	case FieldChoice:
		for _, c := range f.Choices {
			if fmt.Sprint(c) == fmt.Sprint(f.Default) {
				return ""
			}
		}
		return "Must be one of the choices."
	}
	return ""
}

// ParseFilterRules validates filter rules (a JSON array decoded into raw;
// nil means none) against the step vocabulary and the definition's
// runtime fields, and returns them typed. A missing type or state means
// all or any.
func ParseFilterRules(raw any, fields map[string]WorkflowField) ([]FilterRule, FieldErrors) {
	errs := FieldErrors{}
	out := []FilterRule{}
	if raw == nil {
		return out, errs
	}
	list, ok := raw.([]any)
	if !ok {
		errs.Add("filter_rules", "Must be a list of rules.")
		return out, errs
	}
	for i, item := range list {
		path := fmt.Sprintf("filter_rules[%d]", i)
		obj, ok := item.(map[string]any)
		if !ok {
			errs.Add(path, "Must be an object with type, state and action.")
			continue
		}
		wfCheckKeys(errs, path, obj, "type", "state", "action")
		rule := FilterRule{Type: "all", State: "any"}
		if v, present := obj["type"]; present {
			rule.Type, _ = v.(string)
			if !slices.Contains(RuleTypes, rule.Type) {
				errs.Add(path+".type", "Must be one of: "+strings.Join(RuleTypes, ", ")+".")
			}
		}
		if v, present := obj["state"]; present {
			rule.State, _ = v.(string)
			if !slices.Contains(RuleStates, rule.State) {
				errs.Add(path+".state", "Must be one of: "+strings.Join(RuleStates, ", ")+".")
			}
		}
		steps, ok := obj["action"].([]any)
		if !ok || len(steps) == 0 {
			errs.Add(path+".action", "A non-empty list of steps is required.")
			out = append(out, rule)
			continue
		}
		for j, s := range steps {
			rule.Action = append(rule.Action, wfParseStep(errs, fmt.Sprintf("%s.action[%d]", path, j), s, fields))
		}
		out = append(out, rule)
	}
	return out, errs
}

func wfParseStep(errs FieldErrors, path string, raw any, fields map[string]WorkflowField) StepSpec {
	obj, ok := raw.(map[string]any)
	if !ok {
		errs.Add(path, "Must be an object with name and params.")
		return StepSpec{}
	}
	wfCheckKeys(errs, path, obj, "name", "params")
	name, _ := obj["name"].(string)
	step, known := LookupWorkflowStep(name)
	if !known {
		names := make([]string, len(WorkflowSteps))
		for i, s := range WorkflowSteps {
			names[i] = s.Name
		}
		errs.Add(path+".name", fmt.Sprintf("Unknown step %q; expected one of: %s.", name, strings.Join(names, ", ")))
		return StepSpec{Name: name}
	}
	params := map[string]any{}
	if p, present := obj["params"]; present && p != nil {
		if params, ok = p.(map[string]any); !ok {
			errs.Add(path+".params", "Must be an object.")
			return StepSpec{Name: name}
		}
	}
	for _, k := range wfSortedKeys(params) {
		ppath := path + ".params." + k
		spec, ok := step.Param(k)
		if !ok {
			errs.Add(ppath, fmt.Sprintf("Unknown parameter of step %s.", name))
			continue
		}
		if ref, isRef := wfFieldRef(params[k]); isRef {
			f, exists := fields[ref]
			switch {
			case !exists:
				errs.Add(ppath, fmt.Sprintf("References the runtime field %q, which the definition does not have.", ref))
			case !wfParamAcceptsField(spec, f.Type):
				errs.Add(ppath, fmt.Sprintf("The runtime field %q is of type %s, which cannot feed a %s parameter.", ref, f.Type, spec.Type))
			}
			continue
		}
		if msg := wfCheckParam(spec, params[k]); msg != "" {
			errs.Add(ppath, msg)
		}
	}
	for _, spec := range step.Params {
		if _, present := params[spec.Name]; spec.Required && (!present || params[spec.Name] == nil) {
			errs.Add(path+".params."+spec.Name, "This parameter is required.")
		}
	}
	if len(params) == 0 {
		params = nil
	}
	return StepSpec{Name: name, Params: params}
}

// WorkflowsQuery selects workflow definitions into dest, ordered by name.
func WorkflowsQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("w.name")
}

// GetWorkflow loads a workflow definition by id.
func GetWorkflow(ctx context.Context, db bun.IDB, id int64) (*Workflow, error) {
	w := new(Workflow)
	err := db.NewSelect().Model(w).Where("w.id = ?", id).Scan(ctx)
	return w, dbErr(err)
}

// GetWorkflowByName loads a workflow definition by name.
func GetWorkflowByName(ctx context.Context, db bun.IDB, name string) (*Workflow, error) {
	w := new(Workflow)
	err := db.NewSelect().Model(w).Where("w.name = ?", name).Scan(ctx)
	return w, dbErr(err)
}

// WorkflowNameTaken reports whether another definition than id has name.
func WorkflowNameTaken(ctx context.Context, db bun.IDB, name string, id int64) (bool, error) {
	n, err := db.NewSelect().Model((*Workflow)(nil)).Where("name = ? AND id <> ?", name, id).Count(ctx)
	return n > 0, dbErr(err)
}

// SaveWorkflow inserts (ID 0) or updates a workflow definition.
func SaveWorkflow(ctx context.Context, db bun.IDB, w *Workflow) error {
	now := time.Now().UTC()
	w.UpdatedAt = now
	if w.ID == 0 {
		w.CreatedAt = now
		_, err := db.NewInsert().Model(w).Returning("id").Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(w).WherePK().ExcludeColumn("created_at", "builtin").Exec(ctx)
	return dbErr(err)
}

// DeleteWorkflow deletes a definition that is not built in.
func DeleteWorkflow(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*Workflow)(nil)).Where("id = ? AND builtin = ?", id, false).Exec(ctx)
	return affected(res, err)
}

func wfString(s string) *string { return &s }

// BuiltinWorkflows returns the definitions every hub has. They can be
// disabled, hidden and edited but not renamed or deleted.
func BuiltinWorkflows() []Workflow {
	step := func(name string, params map[string]any) []StepSpec {
		return []StepSpec{{Name: name, Params: params}}
	}
	destination := WorkflowField{Type: FieldText, Label: "Destination site", Required: true}
	queue := WorkflowField{Type: FieldText, Label: "Destination queue", Default: vocab.DefaultQueue}
	return []Workflow{
		{Name: "migrate", Label: "Migrate", Discovery: wfString(DiscoveryRecursive),
			IconClasses: []any{"fa", "fa-cloud-upload-alt"},
			FilterRules: []FilterRule{
				{Type: "file", State: "resident", Action: step(StepMigrate, nil)},
				{Type: "file", State: "premigrated", Action: step(StepMigrate, nil)},
			}},
		{Name: "premigrate", Label: "Premigrate", Discovery: wfString(DiscoveryRecursive),
			IconClasses: []any{"fa", "fa-cloud"},
			FilterRules: []FilterRule{{Type: "file", State: "resident", Action: step(StepPremigrate, nil)}}},
		{Name: "recall", Label: "Recall", Discovery: wfString(DiscoveryRecursive),
			IconClasses: []any{"fa", "fa-cloud-download-alt"},
			FilterRules: []FilterRule{
				{Type: "file", State: "migrated", Action: step(StepRecall, nil)},
				{Type: "file", State: "premigrated", Action: step(StepRecall, nil)},
			}},
		{Name: "send", Label: "Send to site", Discovery: wfString(DiscoveryRecursive), IconClasses: []any{"fa", "fa-paper-plane"},
			Fields: map[string]WorkflowField{
				"destination_site":  destination,
				"destination_queue": queue,
				"hydrate":           {Type: FieldCheckbox, Label: "Send full data of migrated files", Default: false},
			},
			FilterRules: []FilterRule{{Type: "all", State: "any", Action: step(StepSend, map[string]any{
				"destination_site": "$destination_site", "destination_queue": "$destination_queue", "hydrate": "$hydrate"})}}},
		{Name: "site_sync", Label: "Site sync", Discovery: wfString(DiscoverySnapdiff),
			IconClasses: []any{"fa", "fa-sync"},
			Fields: map[string]WorkflowField{
				"destination_site":  destination,
				"destination_queue": queue,
				"sync_preference": {Type: FieldChoice, Label: "When both sides changed", Default: "newest",
					Choices: []any{"newest", "local", "ignore"}},
			},
			FilterRules: []FilterRule{{Type: "all", State: "any", Action: step(StepSiteSync, map[string]any{
				"destination_site": "$destination_site", "destination_queue": "$destination_queue",
				"sync_preference": "$sync_preference"})}}},
	}
}

// EnsureBuiltinWorkflows creates the built-in definitions that are
// missing. It never overwrites one an operator has edited, so it is safe
// at every start.
func EnsureBuiltinWorkflows(ctx context.Context, db bun.IDB) error {
	now := time.Now().UTC()
	for _, w := range BuiltinWorkflows() {
		w.Enabled, w.Visible, w.Builtin = true, true, true
		w.CreatedAt, w.UpdatedAt = now, now
		if w.Fields == nil {
			w.Fields = map[string]WorkflowField{}
		}
		if w.DiscoveryOptions == nil {
			w.DiscoveryOptions = map[string]any{}
		}
		if _, err := db.NewInsert().Model(&w).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("ensure built-in workflow %s: %w", w.Name, dbErr(err))
		}
	}
	return nil
}
