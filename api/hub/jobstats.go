package hub

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) jobStatRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("jobstat")
	r.GET("/jobstats/", perm, handle(s.listJobStats))
	r.GET("/jobstats/:id/", perm, handle(s.getJobStat))
	r.GET("/jobstats/:id/history/", perm, handle(s.jobStatHistory))
}

func jobStatURL(c *gin.Context, id int64) string {
	return web.AbsURL(c, fmt.Sprintf("/api/jobstats/%d/", id))
}

// renderJobStat is the latest outcome of a path; url is in lists only.
func renderJobStat(st *models.JobStat) jobStatResponse {
	return jobStatResponse{ID: st.ID, Job: st.JobID, Task: st.TaskID, Path: st.Path, Code: st.Code,
		Message: st.Message, State: st.State, Updated: st.Updated}
}

// renderJobStatItem is a job stat in a list, with its URL.
func renderJobStatItem(c *gin.Context, st *models.JobStat) jobStatItem {
	return jobStatItem{renderJobStat(st), jobStatURL(c, st.ID)}
}

// renderJobStatHistory is one past outcome of a path; jobstat and url
// name the record holding the path's latest outcome.
func renderJobStatHistory(c *gin.Context, h *models.JobStatHistoryRow) jobStatHistoryResponse {
	var url *string
	if h.JobStatID != nil {
		u := jobStatURL(c, *h.JobStatID)
		url = &u
	}
	return jobStatHistoryResponse{ID: h.ID, Job: h.JobID, Task: h.TaskID, Path: h.Path, Code: h.Code,
		Message: h.Message, State: h.State, Created: h.Created, JobStat: h.JobStatID, URL: url}
}

// jobStatFilter reads state[], job and path.
func jobStatFilter(c *gin.Context) (models.JobStatFilter, error) {
	v := web.ValidationError{}
	f := models.JobStatFilter{States: queryStates(v, c, "state", models.PathStates), JobID: queryID(v, c, "job"),
		Path: c.Query("path")}
	return f, v.Err()
}

// listJobStats keeps whole pages (servePage) on PostgreSQL, under the
// snapshot of the generations read; on sqlite, where no number moves with
// job stats (a trigger a row would cost every recorded path), it keeps
// the rows of its pages only (jobStatPage).
func (s *Server) listJobStats(c *gin.Context) error {
	return servePage(c, &s.jobStatsPages, func(g models.Generations) (listPage, bool) {
		return listPage{jobs: g.Snapshot}, g.Snapshot != ""
	}, func() ([]byte, bool, error) {
		body, err := s.jobStatsJSON(c)
		return body, true, err
	})
}

// jobStatsJSON is the page of job stats the request asks for: a job's
// latest outcomes (maybe of some states), those a filter selects, or
// their history.
func (s *Server) jobStatsJSON(c *gin.Context) ([]byte, error) {
	f, err := jobStatFilter(c)
	if err != nil {
		return nil, err
	}
	history, err := web.QueryBool(c, "history", false)
	if err != nil {
		return nil, err
	}
	if history {
		return s.historyJSON(c, f)
	}
	if f.Kept() { // a job's stats, maybe of one state: the job keeps their number
		return web.CountedPageJSON(c, nil,
			func(ctx context.Context, w models.Window) ([]any, error) { return s.jobStatPage(c, f, w) },
			func(ctx context.Context) (int, error) { return models.JobStatsCount(ctx, s.DB, f) },
			func(st *any) any { return *st })
	}
	return web.PageJSON(c, func(d *[]models.JobStat) *bun.SelectQuery { return models.JobStatsQuery(s.DB, d, f) },
		func(st *models.JobStat) any { return renderJobStatItem(c, st) })
}

// jobStatPage renders window w of the stats f selects (f.Kept), each kept
// rendered at its row's version (keptPage).
func (s *Server) jobStatPage(c *gin.Context, f models.JobStatFilter, w models.Window) ([]any, error) {
	ctx := c.Request.Context()
	render := func(st *models.JobStat) any { return renderJobStatItem(c, st) }
	if w.Limit == 0 {
		var stats []models.JobStat
		if err := models.JobStatsQuery(s.DB, &stats, f).Scan(ctx); err != nil {
			return nil, err
		}
		return renderAll(stats, render), nil
	}
	keys, err := models.JobStatKeys(ctx, s.DB, f, w)
	if err != nil {
		return nil, err
	}
	return keptPage(c, &s.renderedJobStats, keys, func(ids []int64) ([]models.JobStat, error) { return models.JobStatsByID(ctx, s.DB, ids) },
		func(st *models.JobStat) (models.RowKey, bool) {
			return models.RowKey{ID: st.ID, Version: st.Version}, true
		}, render)
}

// historyJSON is a page of the past outcomes f selects.
func (s *Server) historyJSON(c *gin.Context, f models.JobStatFilter) ([]byte, error) {
	return web.PageJSON(c, func(d *[]models.JobStatHistoryRow) *bun.SelectQuery { return models.JobStatHistoryQuery(s.DB, d, f) },
		func(h *models.JobStatHistoryRow) any { return renderJobStatHistory(c, h) })
}

func (s *Server) jobStatFromPath(c *gin.Context) (*models.JobStat, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetJobStat(c.Request.Context(), s.DB, id)
}

func (s *Server) getJobStat(c *gin.Context) error {
	st, err := s.jobStatFromPath(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderJobStat(st))
	return nil
}

// jobStatHistory pages every outcome the stat's path had in its job. The
// list filters apply on top: a job other than the stat's selects nothing,
// path narrows, history is implied.
func (s *Server) jobStatHistory(c *gin.Context) error {
	st, err := s.jobStatFromPath(c)
	if err != nil {
		return err
	}
	f, err := jobStatFilter(c)
	if err != nil {
		return err
	}
	if _, err := web.QueryBool(c, "history", true); err != nil {
		return err
	}
	if f.JobID != nil && *f.JobID != st.JobID {
		return web.PaginateSlice(c, []models.JobStatHistoryRow{}, func(h *models.JobStatHistoryRow) any { return renderJobStatHistory(c, h) })
	}
	f.JobID, f.ExactPath = &st.JobID, st.Path
	body, err := s.historyJSON(c, f)
	if err != nil {
		return err
	}
	web.WriteJSON(c, body)
	return nil
}
