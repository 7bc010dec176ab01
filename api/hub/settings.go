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

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
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

func settingKeys(values []models.SettingValue) []string {
	keys := make([]string, len(values))
	for i, v := range values {
		keys[i] = v.Key
	}
	return keys
}

// settingsJob is the work of one settings task before it exists.
type settingsJob struct {
	site    *models.Site
	refresh bool
	values  []models.SettingValue
}

// createSettingsTasks records one PENDING settings task per job and
// returns the SettingsWorkflow input serving them all.
func createSettingsTasks(ctx context.Context, db bun.IDB, jobs []settingsJob) ([]models.SettingsTask, workflows.SettingsWorkflowInput, error) {
	var in workflows.SettingsWorkflowInput
	tasks := make([]models.SettingsTask, 0, len(jobs))
	for _, j := range jobs {
		t := models.SettingsTask{TaskType: models.SettingsTaskApply, Site: j.site.Name, Request: json.RawMessage(`{}`)}
		target := workflows.SettingsTarget{Site: j.site.Name, Refresh: j.refresh}
		if j.refresh {
			t.TaskType = models.SettingsTaskRefresh
			t.FriendlyName = "Refresh settings from " + j.site.Name
		} else {
			t.FriendlyName = fmt.Sprintf("Apply %d setting(s) to %s", len(j.values), j.site.Name)
			values := j.values
			if values == nil {
				values = []models.SettingValue{}
			}
			data, err := json.Marshal(map[string]any{"values": values})
			if err != nil {
				return nil, in, err
			}
			t.Request = data
			for _, v := range values {
				target.Values = append(target.Values, site.SettingValue{Key: v.Key, Value: v.Value})
			}
		}
		if err := models.CreateSettingsTask(ctx, db, &t); err != nil {
			return nil, in, err
		}
		target.TaskID = t.ID
		tasks = append(tasks, t)
		in.Targets = append(in.Targets, target)
	}
	if len(tasks) > 0 {
		ids := make([]int64, len(tasks))
		for i := range tasks {
			ids[i] = tasks[i].ID
		}
		wfID := workflows.SettingsWorkflowID(ids[0])
		if err := models.SetSettingsTasksWorkflow(ctx, db, ids, wfID); err != nil {
			return nil, in, err
		}
		for i := range tasks {
			tasks[i].TaskID = wfID
		}
	}
	return tasks, in, nil
}

// runSettings stores what store stores, creates the tasks of the jobs it
// returns and the SettingsWorkflow start they owe in the same
// transaction (changes.KindSettings: the tasks fail if it never can start).
func (s *Server) runSettings(ctx context.Context, store func(ctx context.Context, tx bun.Tx) ([]settingsJob, error)) ([]models.SettingsTask, error) {
	var tasks []models.SettingsTask
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		jobs, err := store(ctx, tx.Tx)
		if err != nil {
			return err
		}
		var in workflows.SettingsWorkflowInput
		if tasks, in, err = createSettingsTasks(ctx, tx, jobs); err != nil || len(tasks) == 0 {
			return err
		}
		p := changes.Settings{}
		if p.Start, err = changes.NewStart(tasks[0].TaskID, workflows.SettingsWorkflowName, in); err != nil {
			return err
		}
		for _, t := range tasks {
			p.TaskIDs = append(p.TaskIDs, t.ID)
		}
		return tx.Owe(ctx, changes.KindSettings, tasks[0].ID, p)
	})
	return tasks, err
}

func renderSettingsTaskRefs(tasks []models.SettingsTask) []settingsTaskRef {
	out := make([]settingsTaskRef, len(tasks))
	for i, t := range tasks {
		out[i] = settingsTaskRef{Site: t.Site, TaskID: t.ID}
	}
	return out
}

func settingsSites(ctx context.Context, db bun.IDB) ([]models.Site, error) {
	var sites []models.Site
	err := models.SitesQuery(db, &sites).Scan(ctx)
	return sites, err
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
	tasks, err := s.runSettings(c.Request.Context(), func(ctx context.Context, tx bun.Tx) ([]settingsJob, error) {
		if err := models.PutSettings(ctx, tx, nil, values); err != nil {
			return nil, err
		}
		sites, err := settingsSites(ctx, tx)
		if err != nil {
			return nil, err
		}
		jobs := make([]settingsJob, len(sites))
		for i := range sites {
			vals, err := models.SiteValuesFor(ctx, tx, sites[i].ID, settingKeys(values))
			if err != nil {
				return nil, err
			}
			jobs[i] = settingsJob{site: &sites[i], values: vals}
		}
		return jobs, nil
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, settingsTasksResponse{Tasks: renderSettingsTaskRefs(tasks)})
	return nil
}

// syncSettings sends every site (or the one named by ?site=) all its
// effective settings again. 202 with one task per site.
func (s *Server) syncSettings(c *gin.Context) error {
	name := c.Query("site")
	tasks, err := s.runSettings(c.Request.Context(), func(ctx context.Context, tx bun.Tx) ([]settingsJob, error) {
		var sites []models.Site
		if name != "" {
			one, err := models.GetSiteByName(ctx, tx, name)
			if isNotFound(err) {
				return nil, web.Invalid("site", "Object with name="+name+" does not exist.")
			} else if err != nil {
				return nil, err
			}
			sites = []models.Site{*one}
		} else {
			var err error
			if sites, err = settingsSites(ctx, tx); err != nil {
				return nil, err
			}
		}
		jobs := make([]settingsJob, len(sites))
		for i := range sites {
			eff, err := models.EffectiveSiteSettings(ctx, tx, sites[i].ID)
			if err != nil {
				return nil, err
			}
			vals := make([]models.SettingValue, len(eff))
			for k, st := range eff {
				vals[k] = models.SettingValue{Key: st.Key, Value: st.Value}
			}
			jobs[i] = settingsJob{site: &sites[i], values: vals}
		}
		return jobs, nil
	})
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
	if _, err := settingsSite(ctx, c, s.DB); err != nil {
		return err
	}
	values, err := in.values(false)
	if err != nil {
		return err
	}
	tasks, err := s.runSettings(ctx, func(ctx context.Context, tx bun.Tx) ([]settingsJob, error) {
		st, err := settingsSite(ctx, c, tx)
		if err != nil {
			return nil, err
		}
		if err := models.PutSettings(ctx, tx, &st.ID, values); err != nil {
			return nil, err
		}
		vals, err := models.SiteValuesFor(ctx, tx, st.ID, settingKeys(values))
		if err != nil {
			return nil, err
		}
		return []settingsJob{{site: st, values: vals}}, nil
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, renderSettingsTaskRefs(tasks)[0])
	return nil
}

// refreshSiteSettings reads what the site applies and creates, as the
// site's own settings, the keys the hub does not know. 202 with the task id.
func (s *Server) refreshSiteSettings(c *gin.Context) error {
	tasks, err := s.runSettings(c.Request.Context(), func(ctx context.Context, tx bun.Tx) ([]settingsJob, error) {
		st, err := settingsSite(ctx, c, tx)
		if err != nil {
			return nil, err
		}
		return []settingsJob{{site: st, refresh: true}}, nil
	})
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
	return settingsTaskDetailResponse{settingsTaskResponse: renderSettingsTask(c, t), Completed: t.Completed,
		FriendlyName: t.FriendlyName, Runtime: runtime, Request: settingsRaw(t.Request), Results: settingsRaw(t.Results)}
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
