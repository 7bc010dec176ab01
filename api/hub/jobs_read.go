package hub

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// jobReadRoutes registers the read side of jobs, tasks and job stats.
// Static paths such as /jobs/recent/ win over /jobs/:id/ in gin.
func (s *Server) jobReadRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("job")
	r.GET("/jobs/", perm, handle(s.listJobs))
	r.GET("/jobs/stats/", perm, handle(s.jobsStats))
	r.GET("/jobs/recent/", perm, handle(s.recentJobs))
	r.GET("/jobs/jobtype_choices/", perm, handle(s.jobTypeChoices))
	r.GET("/jobs/:id/progress/", perm, handle(s.jobProgress))
	r.GET("/jobs/:id/statistics/", perm, handle(s.jobStatistics))
	r.GET("/jobs/:id/files/", perm, handle(s.jobFiles))
	s.taskRoutes(r)
	s.jobStatRoutes(r)
}

// Recent jobs: how many by default and at most (spec: Limits).
const (
	recentJobsDefault = 5
	recentJobsMax     = 100
)

// liveQueryTimeout bounds the Temporal progress query: a workflow whose
// worker is down would otherwise hold the request until the client gives up.
const liveQueryTimeout = 2 * time.Second

// queryValues returns the values of a repeatable filter, sent as name,
// name[] (both repeatable) or comma-separated.
func queryValues(c *gin.Context, name string) []string {
	var out []string
	for _, key := range []string{name, name + "[]"} {
		for _, v := range c.QueryArray(key) {
			for _, part := range strings.Split(v, ",") {
				if p := strings.TrimSpace(part); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// queryIDs parses a repeatable integer filter.
func queryIDs(v web.ValidationError, c *gin.Context, name string) []int64 {
	var out []int64
	for _, s := range queryValues(c, name) {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			v.Add(name, fmt.Sprintf("%q is not a valid integer.", s))
			continue
		}
		out = append(out, id)
	}
	return out
}

// queryID parses a single integer filter; nil when absent.
func queryID(v web.ValidationError, c *gin.Context, name string) *int64 {
	id, ok, err := web.QueryInt(c, name)
	if err != nil {
		v.Add(name, "A valid integer is required.")
	}
	if !ok {
		return nil
	}
	return &id
}

// queryStates parses a repeatable state filter, case-insensitively,
// against the allowed values.
func queryStates(v web.ValidationError, c *gin.Context, name string, allowed []string) []string {
	var out []string
	for _, s := range queryValues(c, name) {
		up := strings.ToUpper(s)
		if !slices.Contains(allowed, up) {
			v.Add(name, fmt.Sprintf("%q is not a valid state; use one of %s.", s, strings.Join(allowed, ", ")))
			continue
		}
		out = append(out, up)
	}
	return out
}

// createdPeriod is the period the created filter names, if any: a filter
// relative to the clock.
func createdPeriod(c *gin.Context) string {
	if p := c.Query("created"); !absent(p) && !strings.EqualFold(p, "all") {
		return p
	}
	return ""
}

// absent reports whether a filter value means "no filter".
func absent(s string) bool { return s == "" || strings.EqualFold(s, "null") }

var periodPattern = regexp.MustCompile(`^(\d+)([dw])$`)

// maxPeriod bounds a period; it keeps day and week counts far from
// time.Duration's overflow.
const maxPeriod = 100 * 365 * 24 * time.Hour

// parsePeriod reads a time period: Nd (days), Nw (weeks) or a Go duration
// such as 1h, 24h or 90m.
func parsePeriod(s string) (time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	var d time.Duration
	if m := periodPattern.FindStringSubmatch(s); m != nil {
		unit := 24 * time.Hour
		if m[2] == "w" {
			unit *= 7
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > int64(maxPeriod/unit) {
			return 0, fmt.Errorf("period %q out of range", s)
		}
		d = time.Duration(n) * unit
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("parse period %q: %w", s, err)
		}
	}
	if d <= 0 || d > maxPeriod {
		return 0, fmt.Errorf("period %q is not between 0 and 100 years", s)
	}
	return d, nil
}

// timeLayouts are the accepted timestamp forms; those without a zone are
// UTC, as the spec says.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"}

// parseUTC reads a timestamp or a date (YYYY-MM-DD). A "+" of the offset
// that a client did not encode arrives as a space, and is put back.
func parseUTC(s string) (t time.Time, dateOnly bool, err error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true, nil
	}
	candidates := []string{s}
	if i := strings.LastIndexByte(s, ' '); i > len("2006-01-02") {
		candidates = append(candidates, s[:i]+"+"+s[i+1:])
	}
	for _, cand := range candidates {
		for _, layout := range timeLayouts {
			if t, err := time.Parse(layout, cand); err == nil {
				return t.UTC(), false, nil
			}
		}
	}
	return time.Time{}, false, fmt.Errorf("parse time %q", s)
}

// queryTimeRange reads a from/to pair. A date-only "to" covers that
// whole day.
func queryTimeRange(v web.ValidationError, c *gin.Context, fromName, toName string) models.TimeRange {
	var r models.TimeRange
	const msg = "Use an RFC 3339 timestamp (UTC unless it has an offset) or a date YYYY-MM-DD."
	if s := c.Query(fromName); !absent(s) {
		if t, _, err := parseUTC(s); err != nil {
			v.Add(fromName, msg)
		} else {
			r.From = &t
		}
	}
	if s := c.Query(toName); !absent(s) {
		t, dateOnly, err := parseUTC(s)
		switch {
		case err != nil:
			v.Add(toName, msg)
		case dateOnly:
			next := t.AddDate(0, 0, 1)
			r.To, r.ToExclusive = &next, true
		default:
			r.To = &t
		}
	}
	return r
}

// jobStates are the values the state filter of jobs accepts.
var jobStates = append(append([]string{}, models.JobStates...), vocab.JobHasFailures)

// jobFilter reads the filters of GET /jobs/, /jobs/stats/ and
// /jobs/recent/, with the site a site name names now looked up once.
func (s *Server) jobFilter(c *gin.Context) (models.JobFilter, error) {
	f, err := parseJobFilter(c, time.Now())
	if err != nil {
		return f, err
	}
	return f, f.ResolveSite(c.Request.Context(), s.DB)
}

// parseJobFilter reads the filters of GET /jobs/ and /jobs/stats/.
func parseJobFilter(c *gin.Context, now time.Time) (models.JobFilter, error) {
	v := web.ValidationError{}
	var f models.JobFilter
	if p := createdPeriod(c); p != "" {
		d, err := parsePeriod(p)
		if err != nil {
			v.Add("created", "Use a time period such as 1h, 24h, 7d, 2w or 30d.")
		} else {
			from := now.Add(-d)
			f.Created.From = &from
		}
	} else {
		f.Created = queryTimeRange(v, c, "created_time_from", "created_time_to")
	}
	f.Completed = queryTimeRange(v, c, "completed_time_from", "completed_time_to")
	for _, name := range []string{"jobtype", "workflow"} {
		if w := c.Query(name); w != "" {
			f.Workflow = append(f.Workflow, w)
		}
	}
	f.States = queryStates(v, c, "state", jobStates)
	f.OwnerIDs = queryIDs(v, c, "owner_ids")
	f.ClientKeyIDs = queryIDs(v, c, "clientkey_ids")
	f.ScheduleIDs = queryIDs(v, c, "schedule_ids")
	f.SiteID = queryID(v, c, "site_id")
	f.Site = c.Query("site")
	f.InputPathsPrefix = c.Query("input_paths_prefix")
	f.SearchKeyword = strings.TrimSpace(c.Query("search_keyword"))
	hide, err := web.QueryBool(c, "hide_noop", false)
	if err != nil {
		v.Add("hide_noop", "Must be a valid boolean.")
	}
	f.HideNoop = hide
	f.Queue = c.Query("queue")
	f.QueueID = queryID(v, c, "queue_id")
	return f, v.Err()
}

// listJobs keeps whole pages (servePage) under the generations of sites
// and jobs, but pages that move with the clock: a filter by a period
// before now, a running job's runtime.
func (s *Server) listJobs(c *gin.Context) error {
	return servePage(c, &s.jobsPages, jobsGenerations, func() ([]byte, bool, error) {
		f, err := s.jobFilter(c)
		if err != nil {
			return nil, false, err
		}
		owners, err := s.jobOwners(c, f)
		if err != nil {
			return nil, false, err
		}
		timeless := createdPeriod(c) == ""
		body, err := web.CountedPageJSON(c, gin.H{"owners": owners},
			func(ctx context.Context, w models.Window) ([]any, error) {
				page, pageTimeless, err := s.jobPage(c, f, w)
				timeless = timeless && pageTimeless
				return page, err
			},
			func(ctx context.Context) (int, error) { return models.CountJobs(ctx, s.DB, f) },
			func(j *any) any { return *j })
		return body, timeless, err
	})
}

// jobOwners answers the owners of the jobs f matches. Those of every job
// are kept, rendered, under the owners generation the request read: it
// moves when a job is inserted or deleted or its owner changes, not with
// a running job's progress, which makes the jobs list read its page anew.
func (s *Server) jobOwners(c *gin.Context, f models.JobFilter) (any, error) {
	g, authenticated := auth.RequestGenerations(c)
	if !authenticated || !f.IsZero() {
		return models.JobOwners(c.Request.Context(), s.DB, f)
	}
	if raw, ok := s.owners.Get(g.Owners); ok {
		return raw, nil
	}
	owners, err := models.JobOwners(c.Request.Context(), s.DB, f)
	if err != nil {
		return nil, err
	}
	return s.owners.Render(g.Owners, owners), nil
}

// jobsGenerations are those the jobs and tasks lists read, when the
// database names them.
func jobsGenerations(g models.Generations) (listPage, bool) {
	return listPage{sites: g.Sites, jobs: g.Jobs}, g.Jobs != ""
}

// jobPage renders window w of the jobs matching f, each job kept
// rendered at its row's version (keptPage) but a running one: its runtime
// moves with the clock. timeless: no row moves with the clock (not
// asked of a whole list, which is never kept: servePage).
func (s *Server) jobPage(c *gin.Context, f models.JobFilter, w models.Window) (page []any, timeless bool, err error) {
	ctx := c.Request.Context()
	render := func(j *models.Job) any { return renderJob(c, j) }
	if w.Limit == 0 {
		var jobs []models.Job
		if err := models.JobsQuery(s.DB, &jobs, f).Scan(ctx); err != nil {
			return nil, false, err
		}
		return renderAll(jobs, render), false, nil
	}
	keys, err := models.JobKeys(ctx, s.DB, f, w)
	if err != nil {
		return nil, false, err
	}
	timeless = true
	page, err = keptPage(c, &s.renderedJobs, keys, func(ids []int64) ([]models.Job, error) { return models.JobsByID(ctx, s.DB, ids) },
		func(j *models.Job) (models.RowKey, bool) {
			still := j.Started == nil || j.Completed != nil
			timeless = timeless && still
			return models.RowKey{ID: j.ID, Version: j.Version}, still
		}, render)
	return page, timeless, err
}

func (s *Server) jobsStats(c *gin.Context) error {
	f, err := s.jobFilter(c)
	if err != nil {
		return err
	}
	sum, err := models.SummarizeJobs(c.Request.Context(), s.DB, f)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, sum)
	return nil
}

// recentJobs answers the last n jobs (n or limit, 5 by default, at most
// 100) as a bare array; the jobs filters apply too.
func (s *Server) recentJobs(c *gin.Context) error {
	f, err := s.jobFilter(c)
	if err != nil {
		return err
	}
	n := int64(recentJobsDefault)
	for _, name := range []string{"limit", "n"} {
		v, ok, err := web.QueryInt(c, name)
		if err != nil {
			return err
		}
		if ok {
			if v < 1 {
				return web.Invalid(name, "Ensure this value is at least 1.")
			}
			n = min(v, recentJobsMax)
		}
	}
	// The first n of the jobs list: read as its page is (a site's jobs
	// from the two indexes of its name, not all of them sorted).
	jobs, _, err := s.jobPage(c, f, models.Window{Limit: int(n)})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, jobs)
	return nil
}

func (s *Server) jobTypeChoices(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Workflow) *bun.SelectQuery { return models.WorkflowsQuery(s.DB, d) },
		func(w *models.Workflow) any { return jobTypeChoice{Name: w.Name, Label: w.Label} })
}

// jobProgress answers the stored counters and, while the job's workflow
// runs, its live progress: the workflow's query and the heartbeats of its
// steps in flight. A path's count moves from a step's heartbeat to the
// workflow (step done, outcomes not yet recorded) to the stored counters;
// reading them in that order counts a path on its way at worst twice for
// an instant (progress is capped at 100), never not at all, so the
// answer does not fall back while a batch's outcomes are being recorded.
func (s *Server) jobProgress(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	p, err := s.progressOf(c.Request.Context(), j)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, p)
	return nil
}

// progressOf is the progress answer of job j (see jobProgress).
func (s *Server) progressOf(ctx context.Context, j *models.Job) (*jobProgressResponse, error) {
	var live *liveProgress
	if !vocab.JobFinished(j.State) {
		steps, stepsOK := s.Changes.JobSteps(ctx, j.ID, liveQueryTimeout)
		if p, ok := s.liveProgress(ctx, j.ID); ok {
			live = &liveProgress{JobID: p.JobID, State: p.State, Batches: p.Batches, BatchesDone: p.BatchesDone,
				InFlight: p.InFlight, Paused: p.Paused, Steps: []liveStep{}, FilesUnrecorded: p.FilesUnrecorded}
			if stepsOK {
				live.Steps, live.FilesDone, live.BytesDone = liveSteps(steps)
			}
			var err error
			if j, err = models.GetJob(ctx, s.DB, j.ID); err != nil { // the counters after the live answers
				return nil, err
			}
			if vocab.JobFinished(j.State) {
				live = nil
			}
		}
	}
	progress := math.Round(min(max(j.Progress, 0), 100)*100) / 100
	if j.State == vocab.JobSuccess {
		progress = 100 // a job with no files never moves its counter
	}
	if live != nil && j.NumFiles > 0 && live.FilesDone+live.FilesUnrecorded > 0 {
		// Paths the first steps of batches in flight have finished are not
		// in the stored counters yet (those of later steps already are).
		n := j.NumProcessedFiles + j.NumFailedFiles + j.NumSkippedFiles + live.FilesDone + live.FilesUnrecorded
		progress = max(progress, math.Round(min(100*float64(n)/float64(j.NumFiles), 100)*100)/100)
	}
	return &jobProgressResponse{ID: j.ID, State: j.State, Progress: progress, DirWalkComplete: j.DirWalkComplete,
		NumFiles: j.NumFiles, NumProcessedFiles: j.NumProcessedFiles, NumFailedFiles: j.NumFailedFiles,
		NumSkippedFiles: j.NumSkippedFiles, NumAbortedFiles: j.NumAbortedFiles, NumCancelledFiles: j.NumCancelledFiles,
		Live: live}, nil
}

// liveSteps renders the steps in flight and sums what the first steps of
// their batches have finished.
func liveSteps(steps []site.StepProgress) (out []liveStep, files, bytes int64) {
	out = []liveStep{}
	for _, p := range steps {
		out = append(out, liveStep{Step: p.Step, StepIndex: p.StepIndex, Run: p.Run, Batch: p.Batch,
			Files: p.Files, FilesDone: p.FilesDone, Bytes: p.Bytes, BytesDone: p.BytesDone})
		bytes += p.BytesDone
		if p.StepIndex == 0 {
			files += int64(p.FilesDone)
		}
	}
	return out, files, bytes
}

// liveProgress asks the job's workflow for its progress; any failure (no
// such workflow, no worker) means there is no live answer.
func (s *Server) liveProgress(ctx context.Context, jobID int64) (workflows.JobProgress, bool) {
	return s.Changes.JobProgress(ctx, jobID, liveQueryTimeout)
}

func (s *Server) jobStatistics(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	st, err := models.GetJobStatistics(c.Request.Context(), s.DB, j.ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, jobStatisticsResponse{ID: j.ID, State: j.State, Bytes: st.Bytes,
		Files: fileStatistics{Total: st.Files, ByState: st.ByState, ByCode: st.ByCode, BytesByState: st.BytesByState},
		Tasks: taskStatistics{Total: st.Tasks, ByState: st.TaskByState, ByType: st.TaskByType}})
	return nil
}

// fileCategories maps the category of GET /jobs/{id}/files/ to path states.
var fileCategories = map[string][]string{
	"success":   {vocab.TaskSuccess},
	"failure":   {vocab.TaskFailure, vocab.TaskError},
	"skipped":   {vocab.TaskSkipped},
	"cancelled": {vocab.TaskCancelled},
	"aborted":   {vocab.PathAborted},
}

func (s *Server) jobFiles(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	f := models.JobStatFilter{JobID: &j.ID}
	if cat := c.Query("category"); cat != "" {
		states, ok := fileCategories[strings.ToLower(cat)]
		if !ok {
			return web.Invalid("category", "Use one of success, failure, skipped, cancelled, aborted.")
		}
		f.States = states
	}
	return web.Paginate(c, func(d *[]models.JobStat) *bun.SelectQuery { return models.JobStatsQuery(s.DB, d, f) },
		func(st *models.JobStat) any { return renderJobStatItem(c, st) })
}
