package hub

import (
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

// saveWorkflowDef creates (POST) or updates (PATCH) a definition.
// external_only is accepted on create only.
func (s *Server) saveWorkflowDef(c *gin.Context) error {
	var in changes.WorkflowDefInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	w, err := s.Changes.SaveWorkflowDef(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	return saved(c, id == 0, renderWorkflowDef(c, w))
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
