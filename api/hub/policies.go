package hub

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) policyRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("policy")
	r.GET("/policies/", perm, handle(s.listPolicies))
	r.POST("/policies/", perm, handle(s.savePolicy))
	r.GET("/policies/:id/", perm, handle(s.getPolicy))
	r.PATCH("/policies/:id/", perm, handle(s.savePolicy))
	r.DELETE("/policies/:id/", perm, handle(s.deletePolicy))
	r.POST("/policies/:id/run/", auth.Require("change_policy"), handle(s.runPolicy))
}

// renderPolicy shows a policy; its triggers are a string on read (the
// spec's shape): the JSON text of the trigger list.
func renderPolicy(c *gin.Context, p *models.Policy) policyResponse {
	triggers, _ := json.Marshal(nonNilSlice(p.Triggers))
	r := policyResponse{ID: p.ID, URL: recordURL(c, "policies", p.ID), Created: p.Created, Name: p.Name, Enabled: p.Enabled,
		PolicyType: p.PolicyType, Filesystem: p.Filesystem, Site: p.SiteID, Spaces: nonNilSlice(p.Spaces), Threads: p.Threads,
		Order: policyOrder{ID: p.ID, By: p.OrderBy, Reverse: p.OrderReverse}, Schedule: p.Schedule,
		Triggers: string(triggers), ConditionGroups: nonNilSlice(p.ConditionGroups)}
	if p.Schedule != nil {
		sch := *p.Schedule
		sch.Cron = changes.PolicyCron(p.Schedule)
		sch.Timezone = changes.PolicyTimezone(p) // "" on record: the site's
		r.Schedule = &sch
	}
	return r
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) listPolicies(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Policy) *bun.SelectQuery { return models.PoliciesQuery(s.DB, d) },
		func(p *models.Policy) any { return renderPolicy(c, p) })
}

func (s *Server) getPolicy(c *gin.Context) error {
	return getOne(c, s.DB, models.GetPolicy, renderPolicy)
}

// savePolicy creates (POST, 201) or updates (PATCH) a policy; its
// Temporal Schedule follows (changes.SavePolicy).
func (s *Server) savePolicy(c *gin.Context) error {
	var in changes.PolicyInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	p, job, err := s.Changes.SavePolicy(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	r := renderPolicy(c, p)
	if job != nil {
		r.Job = &job.ID
	}
	c.JSON(createdOrOK(c), r)
	return nil
}

func (s *Server) deletePolicy(c *gin.Context) error { return deleteThrough(c, s.Changes.DeletePolicy) }

// runPolicy starts a run of the policy now: 202 with the id of its job.
func (s *Server) runPolicy(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	j, err := s.Changes.RunPolicy(c.Request.Context(), id, "")
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, policyRunResponse{ID: j.ID, Job: recordURL(c, "jobs", j.ID)})
	return nil
}
