package hub

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) taskRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("task")
	r.GET("/tasks/", perm, handle(s.listTasks))
	r.GET("/tasks/:id/", perm, handle(s.getTask))
	r.GET("/tasks/:id/files/", perm, handle(s.taskFiles))
}

// renderTask is a task as the API shows it; detail adds the fields the
// spec lists as detail only.
func renderTask(c *gin.Context, t *models.TaskRow, detail bool) gin.H {
	parents, parentsText := []int64{}, ""
	if t.ParentID != nil {
		parents, parentsText = []int64{*t.ParentID}, strconv.FormatInt(*t.ParentID, 10)
	}
	out := gin.H{"id": t.ID, "url": web.AbsURL(c, fmt.Sprintf("/api/tasks/%d/", t.ID)), "job": t.JobID,
		"site": t.Site, "queue": t.Queue, "tasktype": t.TaskType, "task_id": t.TaskID, "state": t.State,
		"created": t.Created, "started": t.Started, "dynamic_parents": parents, "parents": parentsText}
	if detail {
		var runtime *string
		if t.Started != nil {
			end := time.Now()
			if t.Completed != nil {
				end = *t.Completed
			}
			r := durationString(end.Sub(*t.Started))
			runtime = &r
		}
		out["completed"], out["friendly_name"], out["result"], out["runtime"] = t.Completed, t.FriendlyName, taskResult(t.Result), runtime
		out["paths"], out["run"], out["batch"], out["step"] = t.NumPaths, t.Run, t.Batch, t.Step
	}
	return out
}

// taskResult is a task's result as clients see it: its error without
// Temporal's wording (web.CleanErrorText).
func taskResult(r map[string]any) map[string]any {
	msg, ok := r["error"].(string)
	if !ok {
		return r
	}
	out := make(map[string]any, len(r))
	for k, v := range r {
		out[k] = v
	}
	out["error"] = web.CleanErrorText(msg)
	return out
}

// durationString formats d as "[D ]HH:MM:SS[.ffffff]", the duration
// format clients of the older API know.
func durationString(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	out := fmt.Sprintf("%02d:%02d:%02d", int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60)
	if us := int(d/time.Microsecond) % 1e6; us > 0 {
		out += fmt.Sprintf(".%06d", us)
	}
	if days > 0 {
		out = fmt.Sprintf("%d %s", days, out)
	}
	return out
}

func (s *Server) listTasks(c *gin.Context) error {
	v := web.ValidationError{}
	f := models.TaskFilter{TaskType: c.Query("tasktype"), TaskID: c.Query("task_id"),
		States: queryStates(v, c, "state", models.TaskStates), JobID: queryID(v, c, "job_id")}
	if _, sent := c.GetQuery("internal"); sent {
		internal, err := web.QueryBool(c, "internal", false)
		if err != nil {
			v.Add("internal", "Must be a valid boolean.")
		}
		f.Internal = &internal
	}
	if err := v.Err(); err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.TaskRow) *bun.SelectQuery { return models.TasksQuery(s.DB, d, f) },
		func(t *models.TaskRow) any { return renderTask(c, t, false) })
}

func (s *Server) taskFromPath(c *gin.Context) (*models.TaskRow, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetTask(c.Request.Context(), s.DB, id)
}

func (s *Server) getTask(c *gin.Context) error {
	t, err := s.taskFromPath(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderTask(c, t, true))
	return nil
}

// taskFiles answers the task record with a page of the outcomes it
// recorded under "files". type is accepted and ignored: the hub does not
// record what kind of entry a path was.
func (s *Server) taskFiles(c *gin.Context) error {
	t, err := s.taskFromPath(c)
	if err != nil {
		return err
	}
	v := web.ValidationError{}
	f := models.JobStatFilter{TaskID: &t.ID, States: queryStates(v, c, "state", models.PathStates), Site: c.Query("site")}
	if err := v.Err(); err != nil {
		return err
	}
	page, err := web.PageOf(c, func(d *[]models.JobStatHistoryRow) *bun.SelectQuery { return models.JobStatHistoryQuery(s.DB, d, f) },
		func(h *models.JobStatHistoryRow) any { return renderJobStatHistory(c, h) })
	if err != nil {
		return err
	}
	out := renderTask(c, t, true)
	out["files"] = page
	c.JSON(http.StatusOK, out)
	return nil
}
