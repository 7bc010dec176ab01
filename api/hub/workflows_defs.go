package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) workflowDefRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("workflow")
	r.GET("/workflows/", perm, handle(s.listWorkflowDefs))
	r.POST("/workflows/", perm, handle(s.saveWorkflowDef))
	r.GET("/workflows/:id/", perm, handle(s.getWorkflowDef))
	r.PATCH("/workflows/:id/", perm, handle(s.saveWorkflowDef))
	r.DELETE("/workflows/:id/", perm, handle(s.deleteWorkflowDef))
}

func renderWorkflowDef(c *gin.Context, w *models.Workflow) workflowResponse {
	fields := w.Fields
	if fields == nil {
		fields = map[string]models.WorkflowField{}
	}
	rules := w.FilterRules
	if rules == nil {
		rules = []models.FilterRule{}
	}
	opts := w.DiscoveryOptions
	if opts == nil {
		opts = map[string]any{}
	}
	return workflowResponse{ID: w.ID, URL: web.AbsURL(c, "/api/workflows/"+strconv.FormatInt(w.ID, 10)+"/"),
		Name: w.Name, Label: w.Label, Discovery: w.Discovery, DiscoveryOptions: opts,
		Fields: fields, FilterRules: rules, IconClasses: w.IconClasses, Enabled: w.Enabled,
		Visible: w.Visible, ScheduleOnly: w.ScheduleOnly, ExternalOnly: w.ExternalOnly,
		PreferredQueue: w.PreferredQueue, Builtin: w.Builtin}
}

func (s *Server) listWorkflowDefs(c *gin.Context) error {
	enabled, err := queryBoolFilter(c, "enabled")
	if err != nil {
		return err
	}
	visible, err := queryBoolFilter(c, "visible")
	if err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.Workflow) *bun.SelectQuery {
		q := models.WorkflowsQuery(s.DB, d)
		if enabled != nil {
			q = q.Where("w.enabled = ?", *enabled)
		}
		if visible != nil {
			q = q.Where("w.visible = ?", *visible)
		}
		return q
	}, func(w *models.Workflow) any { return renderWorkflowDef(c, w) })
}

// queryBoolFilter parses a boolean filter; nil when absent.
func queryBoolFilter(c *gin.Context, name string) (*bool, error) {
	if c.Query(name) == "" {
		return nil, nil
	}
	b, err := web.QueryBool(c, name, false)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

func (s *Server) getWorkflowDef(c *gin.Context) error {
	return getOne(c, s.DB, models.GetWorkflow, renderWorkflowDef)
}

// workflowDefInput is the writable part of a definition. The JSON-valued
// fields stay raw so that null (clear) differs from absent (keep) and so
// the validators can name the exact rule or field that is wrong.
type workflowDefInput struct {
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

// rawJSONMember decodes a raw JSON member keeping numbers exact; sent reports
// whether the member was present at all.
func rawJSONMember(raw json.RawMessage) (v any, sent bool) {
	if len(raw) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&v) // raw was already checked by web.Bind
	return v, true
}

// apply validates the input and writes it onto w.
func (in *workflowDefInput) apply(ctx context.Context, db bun.IDB, w *models.Workflow, create bool) error {
	v := web.ValidationError{}
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
	if val, sent := rawJSONMember(in.Discovery); sent {
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
	if val, sent := rawJSONMember(in.DiscoveryOptions); sent {
		switch o := val.(type) {
		case nil:
			w.DiscoveryOptions = map[string]any{}
		case map[string]any:
			w.DiscoveryOptions = o
		default:
			v.Add("discovery_options", "Must be an object.")
		}
	}
	if val, sent := rawJSONMember(in.IconClasses); sent {
		switch val.(type) {
		case nil, map[string]any, []any:
			w.IconClasses = val
		default:
			v.Add("icon_classes", "Must be an object or a list.")
		}
	}
	if val, sent := rawJSONMember(in.PreferredQueue); sent {
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
	if val, sent := rawJSONMember(in.Fields); sent || create {
		fields, errs := models.ParseWorkflowFields(val)
		addFieldErrors(v, errs)
		w.Fields = fields
	}
	if val, sent := rawJSONMember(in.FilterRules); sent || create || in.Fields != nil {
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
	val, _ := rawJSONMember(data)
	return val
}

func addFieldErrors(v web.ValidationError, errs models.FieldErrors) {
	for field, msgs := range errs {
		for _, m := range msgs {
			v.Add(field, m)
		}
	}
}

// saveWorkflowDef creates (POST) or updates (PATCH) a definition.
// external_only is accepted on create only.
func (s *Server) saveWorkflowDef(c *gin.Context) error {
	var in workflowDefInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	create := c.Request.Method == http.MethodPost
	w := &models.Workflow{Enabled: true, Visible: true}
	err := s.Changes.Commit(c.Request.Context(), func(ctx context.Context, tx *changes.Tx) error {
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if w, err = models.GetWorkflow(ctx, tx, id); err != nil {
				return err
			}
		}
		if err := in.apply(ctx, tx, w, create); err != nil {
			return err
		}
		return models.SaveWorkflow(ctx, tx, w)
	})
	if err != nil {
		return err
	}
	return saved(c, create, renderWorkflowDef(c, w))
}

func (s *Server) deleteWorkflowDef(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	w, err := models.GetWorkflow(ctx, s.DB, id)
	if err != nil {
		return err
	}
	if w.Builtin {
		return web.Errorf(http.StatusConflict, "Built-in workflows cannot be deleted; disable or hide them instead.")
	}
	if err := models.DeleteWorkflow(ctx, s.DB, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
