package changes

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// WorkflowDefInput is the writable part of a definition. The JSON-valued
// fields stay raw so that null (clear) differs from absent (keep) and so
// the validators can name the exact rule or field that is wrong.
type WorkflowDefInput struct {
	Name             *string         `json:"name"`
	Label            *string         `json:"label"`
	Discovery        json.RawMessage `json:"discovery"`
	DiscoveryOptions json.RawMessage `json:"discovery_options"`
	Fields           json.RawMessage `json:"fields"`
	FilterRules      json.RawMessage `json:"filter_rules"`
	IconClasses      json.RawMessage `json:"icon_classes"`
	Enabled          *bool           `json:"enabled"`
	Visible          *bool           `json:"visible"`
	ScheduleOnly     *bool           `json:"schedule_only"`
	ExternalOnly     *bool           `json:"external_only"` // create only
	PreferredQueue   json.RawMessage `json:"preferred_queue"`
}

// RawMember decodes a raw JSON member keeping numbers exact; sent reports
// whether the member was present at all.
func RawMember(raw json.RawMessage) (v any, sent bool) {
	if len(raw) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&v) // raw was already checked by web.Bind
	return v, true
}

// apply validates the input and writes it onto w.
func (in *WorkflowDefInput) apply(ctx context.Context, db bun.IDB, w *models.Workflow, create bool) error {
	v := models.FieldErrors{}
	if in.Name != nil || create {
		name := deref(in.Name)
		switch {
		case name == "":
			v.Add("name", "This field is required.")
		case len(name) > 150:
			v.Add("name", "Ensure this field has no more than 150 characters.")
		case !models.NamePattern.MatchString(name):
			v.Add("name", "Must match [a-zA-Z0-9-_]+.")
		case w.Builtin && name != w.Name:
			v.Add("name", "Built-in workflows cannot be renamed.")
		default:
			taken, err := models.WorkflowNameTaken(ctx, db, name, w.ID)
			if err != nil {
				return err
			}
			v.Check(!taken, "name", "A workflow with this name already exists.")
		}
		w.Name = name
	}
	if in.Label != nil || create {
		v.Check(deref(in.Label) != "", "label", "This field is required.")
		w.Label = deref(in.Label)
	}
	if val, sent := RawMember(in.Discovery); sent {
		switch d := val.(type) {
		case nil:
			w.Discovery = nil
		case string:
			if d != models.DiscoveryRecursive && d != models.DiscoverySnapdiff {
				v.Add("discovery", "Must be recursive, snapdiff or null.")
			}
			w.Discovery = &d
		default:
			v.Add("discovery", "Must be recursive, snapdiff or null.")
		}
	}
	if val, sent := RawMember(in.DiscoveryOptions); sent {
		switch o := val.(type) {
		case nil:
			w.DiscoveryOptions = map[string]any{}
		case map[string]any:
			w.DiscoveryOptions = o
		default:
			v.Add("discovery_options", "Must be an object.")
		}
	}
	if val, sent := RawMember(in.IconClasses); sent {
		switch val.(type) {
		case nil, map[string]any, []any:
			w.IconClasses = val
		default:
			v.Add("icon_classes", "Must be an object or a list.")
		}
	}
	if val, sent := RawMember(in.PreferredQueue); sent {
		q, ok := val.(string)
		switch {
		case val == nil:
			w.PreferredQueue = ""
		case !ok || (q != "" && !models.NamePattern.MatchString(q)):
			v.Add("preferred_queue", "Must be a queue name matching [a-zA-Z0-9-_]+ or null.")
		default:
			w.PreferredQueue = q
		}
	}
	// Rules reference fields, so they are checked against the fields the
	// definition will have, whether sent now or kept.
	if val, sent := RawMember(in.Fields); sent || create {
		fields, errs := models.ParseWorkflowFields(val)
		addFieldErrors(v, errs)
		w.Fields = fields
	}
	if val, sent := RawMember(in.FilterRules); sent || create || in.Fields != nil {
		if !sent {
			val = storedFilterRules(w.FilterRules)
		}
		rules, errs := models.ParseFilterRules(val, w.Fields)
		addFieldErrors(v, errs)
		w.FilterRules = rules
	}
	setIf(&w.Enabled, in.Enabled)
	setIf(&w.Visible, in.Visible)
	setIf(&w.ScheduleOnly, in.ScheduleOnly)
	if create {
		setIf(&w.ExternalOnly, in.ExternalOnly)
	}
	return v.Err()
}

// storedFilterRules turns stored rules back into decoded JSON for revalidation.
func storedFilterRules(rules []models.FilterRule) any {
	data, _ := json.Marshal(rules)
	val, _ := RawMember(data)
	return val
}

func addFieldErrors(v models.FieldErrors, errs models.FieldErrors) {
	for field, msgs := range errs {
		for _, m := range msgs {
			v.Add(field, m)
		}
	}
}

// SaveWorkflowDef creates (id 0) or updates workflow definition id from
// in; external_only is taken on create only.
func (s *Service) SaveWorkflowDef(ctx context.Context, id int64, in WorkflowDefInput) (*models.Workflow, error) {
	w := &models.Workflow{Enabled: true, Visible: true}
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if id != 0 {
			var err error
			if w, err = models.GetWorkflow(ctx, tx, id); err != nil {
				return err
			}
		}
		if err := in.apply(ctx, tx, w, id == 0); err != nil {
			return err
		}
		return models.SaveWorkflow(ctx, tx, w)
	})
	return w, err
}
