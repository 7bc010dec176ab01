package hub

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

func (s *Server) scheduleRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("schedule")
	r.GET("/schedules/", perm, handle(s.listSchedules))
	r.POST("/schedules/", perm, handle(s.saveSchedule))
	r.GET("/schedules/:id/", perm, handle(s.getSchedule))
	r.PATCH("/schedules/:id/", perm, handle(s.saveSchedule))
	r.DELETE("/schedules/:id/", perm, handle(s.deleteSchedule))
	r.POST("/schedules/:id/run/", auth.Require("change_schedule"), handle(s.runSchedule))
	r.GET("/schedules/:id/workflows/", perm, handle(s.listScheduleWorkflows))
	r.POST("/schedules/:id/workflows/", perm, handle(s.saveScheduleWorkflow))
	r.GET("/schedules/:id/workflows/:wid/", perm, handle(s.getScheduleWorkflow))
	r.PATCH("/schedules/:id/workflows/:wid/", perm, handle(s.saveScheduleWorkflow))
	r.DELETE("/schedules/:id/workflows/:wid/", perm, handle(s.deleteScheduleWorkflow))
	r.GET("/automatedschedules/", auth.Require("view_schedule"), handle(s.listAutomatedSchedules))
}

func renderSchedule(c *gin.Context, sch *models.Schedule) scheduleResponse {
	r := scheduleResponse{ID: sch.ID, URL: recordURL(c, "schedules", sch.ID), Name: sch.Name, Enabled: sch.Enabled,
		Minute: sch.Minute, Hour: sch.Hour, DayOfMonth: sch.DayOfMonth, DayOfWeek: sch.DayOfWeek, MonthOfYear: sch.MonthOfYear,
		Discovery: sch.Discovery, DiscoveryOptions: nonNilMap(sch.DiscoveryOptions), ManagedPaths: nonNilMap(sch.ManagedPaths),
		Workflows: web.AbsURL(c, fmt.Sprintf("/api/schedules/%d/workflows/", sch.ID))}
	if sch.Site != nil {
		r.Site = sch.Site.Name
	}
	if sch.Space != nil {
		r.Space = &sch.Space.Name
	}
	return r
}

func renderScheduleWorkflow(c *gin.Context, w *models.ScheduleWorkflow) scheduleWorkflowResponse {
	r := scheduleWorkflowResponse{ID: w.ID, URL: web.AbsURL(c, fmt.Sprintf("/api/schedules/%d/workflows/%d/", w.ScheduleID, w.ID)),
		Workflow: w.Workflow, Queue: w.Queue, Fields: nonNilMap(w.Fields)}
	if w.Site != nil {
		r.Site = w.Site.Name
	}
	return r
}

func (s *Server) listSchedules(c *gin.Context) error {
	v := web.ValidationError{}
	siteID, spaceID := queryID(v, c, "site_id"), queryID(v, c, "space_id")
	if err := v.Err(); err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.Schedule) *bun.SelectQuery { return models.SchedulesQuery(s.DB, d, siteID, spaceID) },
		func(sch *models.Schedule) any { return renderSchedule(c, sch) })
}

func (s *Server) getSchedule(c *gin.Context) error {
	return getOne(c, s.DB, models.GetSchedule, renderSchedule)
}

// saveSchedule creates (POST, 201) or updates (PATCH) a schedule; its
// Temporal Schedule follows (changes.SaveSchedule).
func (s *Server) saveSchedule(c *gin.Context) error {
	var in changes.ScheduleInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	sch, err := s.Changes.SaveSchedule(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	c.JSON(createdOrOK(c), renderSchedule(c, sch))
	return nil
}

func (s *Server) deleteSchedule(c *gin.Context) error {
	return deleteThrough(c, s.Changes.DeleteSchedule)
}

// runSchedule fires a schedule now (changes.RunSchedule) and answers the
// schedule (200).
func (s *Server) runSchedule(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	sch, err := s.Changes.RunSchedule(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderSchedule(c, sch))
	return nil
}

func (s *Server) listScheduleWorkflows(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	if _, err := models.GetSchedule(c.Request.Context(), s.DB, id); err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.ScheduleWorkflow) *bun.SelectQuery { return models.ScheduleWorkflowsQuery(s.DB, d, id) },
		func(w *models.ScheduleWorkflow) any { return renderScheduleWorkflow(c, w) })
}

// scheduleWorkflowIDs reads the schedule's and the workflow's ids.
func scheduleWorkflowIDs(c *gin.Context) (sid, wid int64, err error) {
	if sid, err = web.PathID(c, "id"); err != nil {
		return 0, 0, err
	}
	if c.Param("wid") != "" {
		wid, err = web.PathID(c, "wid")
	}
	return sid, wid, err
}

func (s *Server) getScheduleWorkflow(c *gin.Context) error {
	sid, wid, err := scheduleWorkflowIDs(c)
	if err != nil {
		return err
	}
	w, err := models.GetScheduleWorkflow(c.Request.Context(), s.DB, sid, wid)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderScheduleWorkflow(c, w))
	return nil
}

func (s *Server) saveScheduleWorkflow(c *gin.Context) error {
	var in changes.ScheduleWorkflowInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	sid, wid, err := scheduleWorkflowIDs(c)
	if err != nil {
		return err
	}
	w, err := s.Changes.SaveScheduleWorkflow(c.Request.Context(), sid, wid, in)
	if err != nil {
		return err
	}
	c.JSON(createdOrOK(c), renderScheduleWorkflow(c, w))
	return nil
}

func (s *Server) deleteScheduleWorkflow(c *gin.Context) error {
	sid, wid, err := scheduleWorkflowIDs(c)
	if err != nil {
		return err
	}
	if err := s.Changes.DeleteScheduleWorkflow(c.Request.Context(), sid, wid); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// createdOrOK is 201 for a POST, 200 otherwise.
func createdOrOK(c *gin.Context) int {
	if c.Request.Method == http.MethodPost {
		return http.StatusCreated
	}
	return http.StatusOK
}

// targetID is the record a save writes: 0 for a POST (a new record), the
// path's id otherwise.
func targetID(c *gin.Context) (int64, error) {
	if c.Request.Method == http.MethodPost {
		return 0, nil
	}
	return web.PathID(c, "id")
}

// deleteThrough answers 204 once del (a function of changes) removed the path's record.
func deleteThrough(c *gin.Context, del func(ctx context.Context, id int64) error) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	if err := del(c.Request.Context(), id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// listAutomatedSchedules is one read-only list of every recurring thing:
// schedules, policies that run on a schedule or triggers, and spaces'
// snapshot schedules, each with the ID of its Temporal Schedule.
func (s *Server) listAutomatedSchedules(c *gin.Context) error {
	ctx := c.Request.Context()
	var schedules []models.Schedule
	if err := models.SchedulesQuery(s.DB, &schedules, nil, nil).Relation("Workflows").Scan(ctx); err != nil {
		return err
	}
	var policies []models.Policy
	if err := models.PoliciesQuery(s.DB, &policies).Scan(ctx); err != nil {
		return err
	}
	spaceNames, err := models.SpaceNames(ctx, s.DB)
	if err != nil {
		return err
	}
	var out []automatedScheduleResponse
	for i := range schedules {
		sch := &schedules[i]
		var wfs []string
		for _, w := range sch.Workflows {
			wfs = append(wfs, w.Workflow)
		}
		paths := strings.Join(slices.Sorted(maps.Keys(sch.ManagedPaths)), ",")
		names := strings.Join(wfs, ",")
		r := automatedScheduleResponse{Name: sch.Name, ScheduleType: "schedule", Enabled: sch.Enabled,
			Minute: sch.Minute, Hour: sch.Hour, DayOfMonth: sch.DayOfMonth, DayOfWeek: sch.DayOfWeek, MonthOfYear: sch.MonthOfYear,
			DiscoveryID: &sch.ID, DiscoveryName: &sch.Name, DiscoveryManagedPaths: &paths, DiscoveryWorkflow: &names,
			TemporalScheduleID: workflows.ScheduleTemporalID(sch.ID)}
		if sch.Site != nil {
			r.SiteName = sch.Site.Name
		}
		if sch.Space != nil {
			r.Spaces = sch.Space.Name
		}
		out = append(out, r)
	}
	for i := range policies {
		p := &policies[i]
		if p.Schedule == nil && len(p.Triggers) == 0 {
			continue // runs only when asked
		}
		r := automatedScheduleResponse{Name: p.Name, ScheduleType: "policy", Enabled: p.Enabled,
			PolicyID: &p.ID, PolicyName: &p.Name, TemporalScheduleID: workflows.PolicyTemporalID(p.ID)}
		if p.Schedule != nil {
			cr := changes.PolicyCron(p.Schedule)
			r.Minute, r.Hour, r.DayOfMonth, r.DayOfWeek, r.MonthOfYear = cr.Minute, cr.Hour, cr.DayOfMonth, cr.DayOfWeek, cr.MonthOfYear
		}
		if p.Site != nil {
			r.SiteName = p.Site.Name
		}
		var names []string
		for _, id := range p.Spaces {
			names = append(names, spaceNames[id])
		}
		r.Spaces = strings.Join(names, ",")
		out = append(out, r)
	}
	var spaces []models.Space
	if err := models.SpacesQuery(s.DB, &spaces, models.SpaceFilter{}).Scan(ctx); err != nil {
		return err
	}
	for i := range spaces {
		sp := &spaces[i]
		ss := sp.SnapshotSchedule
		if ss == nil || ss.Frequency == "" {
			continue
		}
		line, err := changes.SnapshotCron(ss.Frequency, ss.Time)
		if err != nil {
			continue
		}
		f := strings.Fields(line)
		var sites []string
		for _, l := range sp.Links {
			if l.Site != nil {
				sites = append(sites, l.Site.Name)
			}
		}
		out = append(out, automatedScheduleResponse{Name: sp.Name + " snapshots", ScheduleType: "snapshot", Enabled: true,
			Minute: f[0], Hour: f[1], DayOfMonth: f[2], MonthOfYear: f[3], DayOfWeek: f[4],
			SiteName: strings.Join(sites, ","), Spaces: sp.Name, TemporalScheduleID: workflows.SnapshotTemporalID(sp.ID)})
	}
	if out == nil {
		out = []automatedScheduleResponse{}
	}
	return web.PaginateSlice(c, out, func(r *automatedScheduleResponse) any { return *r })
}
