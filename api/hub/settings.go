package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) settingsRoutes(r *gin.RouterGroup) {
	view, change := auth.Require("view_setting"), auth.Require("change_setting")
	r.GET("/settings/", view, handle(s.listGlobalSettings))
	r.PATCH("/settings/", change, handle(s.patchGlobalSettings))
	r.POST("/settings/sync/", change, handle(s.syncSettings))
	r.GET("/sites/:id/settings/", view, handle(s.listSiteSettings))
	r.PATCH("/sites/:id/settings/", change, handle(s.patchSiteSettings))
	r.POST("/sites/:id/settings/refresh/", change, handle(s.refreshSiteSettings))

	tperm := auth.CRUD("settingstask")
	r.GET("/settingstasks/", tperm, handle(s.listSettingsTasks))
	r.GET("/settingstasks/:id/", tperm, handle(s.getSettingsTask))
}

func renderSetting(st *models.Setting) settingResponse {
	scope := settingScopeSite
	if st.Global() {
		scope = settingScopeGlobal
	}
	return settingResponse{ID: st.ID, Key: st.Key, Value: st.Value, Desc: st.Description, Scope: scope}
}

func renderSettings(ss []models.Setting) []settingResponse {
	out := make([]settingResponse, len(ss))
	for i := range ss {
		out[i] = renderSetting(&ss[i])
	}
	return out
}

func (s *Server) listGlobalSettings(c *gin.Context) error {
	ss, err := models.GlobalSettings(c.Request.Context(), s.DB)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderSettings(ss))
	return nil
}

// settingsInput is the body of the settings PATCHes.
type settingsInput struct {
	Values *[]struct {
		Key   *string         `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"values"`
}

// values validates the input: a non-empty list of distinct, well-formed
// keys, each with a value (null deletes) of at most web.MaxStringLen
// bytes of JSON. globalOnly refuses the whole
// request when any key has a third (target) part.
func (in *settingsInput) values(globalOnly bool) ([]models.SettingValue, error) {
	v := web.ValidationError{}
	if in.Values == nil || len(*in.Values) == 0 {
		return nil, web.Invalid("values", "A non-empty list of {key, value} is required.")
	}
	seen := map[string]bool{}
	out := make([]models.SettingValue, 0, len(*in.Values))
	for i, item := range *in.Values {
		path := fmt.Sprintf("values[%d]", i)
		key := deref(item.Key)
		parts, err := models.SettingKeyParts(key)
		switch {
		case key == "":
			v.Add(path+".key", "This field is required.")
		case err != nil:
			v.Add(path+".key", "Invalid key: "+err.Error()+".")
		case globalOnly && parts != 2:
			v.Add(path+".key", fmt.Sprintf("%s is not a global setting: only <component>:<setting> keys are accepted here, "+
				"so the whole request is refused; set target-specific keys per site with PATCH /api/sites/{id}/settings/.", key))
		case seen[key]:
			v.Add(path+".key", "Duplicate key in this request.")
		}
		seen[key] = true
		switch {
		case len(item.Value) == 0:
			v.Add(path+".value", "This field is required (null deletes the key).")
		case len(item.Value) > web.MaxStringLen:
			v.Add(path+".value", fmt.Sprintf("Ensure the value takes at most %d bytes of JSON.", web.MaxStringLen))
		}
		out = append(out, models.SettingValue{Key: key, Value: item.Value})
	}
	return out, v.Err()
}

func renderSettingsTaskRefs(tasks []models.SettingsTask) []settingsTaskRef {
	out := make([]settingsTaskRef, len(tasks))
	for i, t := range tasks {
		out[i] = settingsTaskRef{Site: t.Site, TaskID: t.ID}
	}
	return out
}

// patchGlobalSettings stores global values (null deletes) and sends each
// site the keys' effective values for it: a site's own setting of a key
// keeps winning over the global one. 202 with one task per site.
func (s *Server) patchGlobalSettings(c *gin.Context) error {
	var in settingsInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	values, err := in.values(true)
	if err != nil {
		return err
	}
	tasks, err := s.Changes.PutGlobalSettings(c.Request.Context(), values)
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, settingsTasksResponse{Tasks: renderSettingsTaskRefs(tasks)})
	return nil
}

// syncSettings sends every site (or the one named by ?site=) all its
// effective settings again. 202 with one task per site.
func (s *Server) syncSettings(c *gin.Context) error {
	tasks, err := s.Changes.SyncSettings(c.Request.Context(), c.Query("site"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, settingsTasksResponse{Tasks: renderSettingsTaskRefs(tasks)})
	return nil
}

func settingsSite(ctx context.Context, c *gin.Context, db bun.IDB) (*models.Site, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetSite(ctx, db, id)
}

// listSiteSettings answers the settings in force at the site as the hub
// knows them: the site's own plus the global ones it does not override
// (scope tells which). ?flat=true answers a key → value object.
func (s *Server) listSiteSettings(c *gin.Context) error {
	flat, err := web.QueryBool(c, "flat", false)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	st, err := settingsSite(ctx, c, s.DB)
	if err != nil {
		return err
	}
	eff, err := models.EffectiveSiteSettings(ctx, s.DB, st.ID)
	if err != nil {
		return err
	}
	if flat {
		out := make(map[string]json.RawMessage, len(eff))
		for _, e := range eff {
			out[e.Key] = e.Value
		}
		c.JSON(http.StatusOK, out)
		return nil
	}
	c.JSON(http.StatusOK, renderSettings(eff))
	return nil
}

// patchSiteSettings stores the site's own values (keys may have a target
// part; null deletes the site's value, so the global one applies again)
// and sends the site the keys' effective values. 202 with the task id.
func (s *Server) patchSiteSettings(c *gin.Context) error {
	var in settingsInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	st, err := settingsSite(ctx, c, s.DB)
	if err != nil {
		return err
	}
	values, err := in.values(false)
	if err != nil {
		return err
	}
	tasks, err := s.Changes.PutSiteSettings(ctx, st.ID, values)
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, renderSettingsTaskRefs(tasks)[0])
	return nil
}

// refreshSiteSettings reads what the site applies and creates, as the
// site's own settings, the keys the hub does not know. 202 with the task id.
func (s *Server) refreshSiteSettings(c *gin.Context) error {
	ctx := c.Request.Context()
	st, err := settingsSite(ctx, c, s.DB)
	if err != nil {
		return err
	}
	tasks, err := s.Changes.RefreshSiteSettings(ctx, st.ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, renderSettingsTaskRefs(tasks)[0])
	return nil
}

func renderSettingsTask(c *gin.Context, t *models.SettingsTask) settingsTaskResponse {
	return settingsTaskResponse{ID: t.ID, URL: web.AbsURL(c, "/api/settingstasks/"+strconv.FormatInt(t.ID, 10)+"/"),
		TaskID: t.TaskID, TaskType: t.TaskType, Job: t.JobID, Site: t.Site, Started: t.Started, State: t.State}
}

func renderSettingsTaskDetail(c *gin.Context, t *models.SettingsTask) settingsTaskDetailResponse {
	var runtime *float64
	if t.Started != nil && t.Completed != nil {
		r := t.Completed.Sub(*t.Started).Seconds()
		runtime = &r
	}
	d := settingsTaskDetailResponse{settingsTaskResponse: renderSettingsTask(c, t), Completed: t.Completed,
		FriendlyName: t.FriendlyName, Runtime: runtime, Request: json.RawMessage(`{}`), Results: json.RawMessage(`{}`)}
	// A task's request and results carry setting values: shown to those
	// who may read settings only (a reviewer's finding: a user without
	// view_setting read a secret setting here).
	if p := auth.Current(c); p != nil && p.Can("view_setting") {
		d.Request, d.Results = settingsRaw(t.Request), settingsRaw(t.Results)
	}
	return d
}

// settingsRaw is a settings task's request or results as clients see
// them: {} for none, and an error without Temporal's wording
// (web.CleanErrorText).
func settingsRaw(raw json.RawMessage) json.RawMessage {
	if models.IsJSONNull(raw) {
		return json.RawMessage(`{}`)
	}
	var all map[string]any
	if json.Unmarshal(raw, &all) != nil {
		return raw
	}
	msg, ok := all["error"].(string)
	if !ok {
		return raw
	}
	all["error"] = web.CleanErrorText(msg)
	if clean, err := json.Marshal(all); err == nil {
		return clean
	}
	return raw
}

// listSettingsTasks is paginated, newest first; filters tasktype, state
// (repeatable, or comma-separated) and job_id.
func (s *Server) listSettingsTasks(c *gin.Context) error {
	f := models.SettingsTaskFilter{TaskType: c.Query("tasktype")}
	for _, st := range append(c.QueryArray("state"), c.QueryArray("state[]")...) {
		for _, one := range strings.Split(st, ",") {
			if one = strings.TrimSpace(one); one != "" {
				f.States = append(f.States, strings.ToUpper(one))
			}
		}
	}
	job, ok, err := web.QueryInt(c, "job_id")
	if err != nil {
		return err
	}
	if ok {
		f.JobID = &job
	}
	return web.Paginate(c, func(d *[]models.SettingsTask) *bun.SelectQuery { return models.SettingsTasksQuery(s.DB, d, f) },
		func(t *models.SettingsTask) any { return renderSettingsTask(c, t) })
}

func (s *Server) getSettingsTask(c *gin.Context) error {
	return getOne(c, s.DB, models.GetSettingsTask, renderSettingsTaskDetail)
}
