package hub

import (
	"context"
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

// renderTask is a task as the API lists it.
func renderTask(c *gin.Context, t *models.TaskRow) taskResponse {
	parents, parentsText := []int64{}, ""
	if t.ParentID != nil {
		parents, parentsText = []int64{*t.ParentID}, strconv.FormatInt(*t.ParentID, 10)
	}
	return taskResponse{ID: t.ID, URL: web.AbsURL(c, fmt.Sprintf("/api/tasks/%d/", t.ID)), Job: t.JobID,
		Site: t.Site, Queue: t.Queue, TaskType: t.TaskType, TaskID: t.TaskID, State: t.State,
		Created: t.Created, Started: t.Started, DynamicParents: parents, Parents: parentsText}
}

// renderTaskDetail adds the fields the spec lists as detail only.
func renderTaskDetail(c *gin.Context, t *models.TaskRow) taskDetailResponse {
	var runtime *string
	if t.Started != nil {
		end := time.Now()
		if t.Completed != nil {
			end = *t.Completed
		}
		r := durationString(end.Sub(*t.Started))
		runtime = &r
	}
	return taskDetailResponse{taskResponse: renderTask(c, t), Completed: t.Completed, FriendlyName: t.FriendlyName,
		Result: taskResult(t.Result), Runtime: runtime, Paths: t.NumPaths, Run: t.Run, Batch: t.Batch, Step: t.Step}
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
	return servePage(c, &s.tasksPages, jobsGenerations, func() ([]byte, bool, error) {
		body, err := web.CountedPageJSON(c, nil,
			func(ctx context.Context, w models.Window) ([]any, error) { return s.taskPage(c, f, w) },
			func(ctx context.Context) (int, error) { return models.CountTasks(ctx, s.DB, f) },
			func(t *any) any { return *t })
		return body, true, err
	})
}

// taskPage renders window w of the tasks matching f, each task kept
// rendered at its row's version (keptPage). A task's parent, part of its
// rendering, is made before it and never changes.
func (s *Server) taskPage(c *gin.Context, f models.TaskFilter, w models.Window) ([]any, error) {
	ctx := c.Request.Context()
	render := func(t *models.TaskRow) any { return renderTask(c, t) }
	if w.Limit == 0 {
		var tasks []models.TaskRow
		if err := models.TasksQuery(s.DB, &tasks, f).Scan(ctx); err != nil {
			return nil, err
		}
		return renderAll(tasks, render), nil
	}
	keys, err := models.TaskKeys(ctx, s.DB, f, w)
	if err != nil {
		return nil, err
	}
	return keptPage(c, &s.renderedTasks, keys, func(ids []int64) ([]models.TaskRow, error) { return models.TasksByID(ctx, s.DB, ids) },
		func(t *models.TaskRow) (models.RowKey, bool) {
			return models.RowKey{ID: t.ID, Version: t.Version}, true
		}, render)
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
	c.JSON(http.StatusOK, renderTaskDetail(c, t))
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
	files := jobStatHistoryPage{Count: page.Count, Next: page.Next, Previous: page.Previous, Results: []jobStatHistoryResponse{}}
	for _, r := range page.Results.([]any) {
		files.Results = append(files.Results, r.(jobStatHistoryResponse))
	}
	c.JSON(http.StatusOK, taskFilesResponse{renderTaskDetail(c, t), files})
	return nil
}
