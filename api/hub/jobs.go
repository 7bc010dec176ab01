package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) jobRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("job")
	r.POST("/file/workflow/", auth.Require("add_job"), handle(s.runWorkflow))
	r.POST("/jobs/", perm, handle(s.createJobOld))
	r.GET("/jobs/:id/", perm, handle(s.getJob))
	r.DELETE("/jobs/:id/", perm, handle(s.deleteJob))
	r.POST("/jobs/:id/pause/", auth.Require("change_job"), handle(s.signalJob(workflows.PauseSignal)))
	r.POST("/jobs/:id/resume/", auth.Require("change_job"), handle(s.signalJob(workflows.ResumeSignal)))
	r.POST("/jobs/:id/cancel/", auth.Require("change_job"), handle(s.cancelJob))
	r.POST("/jobs/:id/resubmit/", auth.Require("change_job"), handle(s.resubmitJob))
}

// runWorkflowInput is the body of POST /file/workflow/.
type runWorkflowInput struct {
	Site               *string        `json:"site"`
	Workflow           *string        `json:"workflow"`
	Discovery          *string        `json:"discovery"`
	Job                *int64         `json:"job"`
	Fields             map[string]any `json:"fields"`
	Paths              []any          `json:"paths"`
	Include            []string       `json:"include"`
	Exclude            []string       `json:"exclude"`
	IgnoreSiteIncludes bool           `json:"ignore_site_includes"`
	IgnoreSiteExcludes bool           `json:"ignore_site_excludes"`
	Queue              *string        `json:"queue"`
	// JobType is the older revision's name of Workflow, read by POST
	// /jobs/ only. A field rather than an embedding struct: encoding/json
	// would name the embedded struct in decoding errors.
	JobType *string `json:"jobtype"`
}

// checkQueue adds a message to v under field unless queue is a valid,
// known queue of site (models.SiteHasQueue): a job on any other queue
// would wait for a worker that never comes, or, with a name Temporal
// refuses, never even schedule its first task.
func checkQueue(ctx context.Context, db bun.IDB, v web.ValidationError, field string, site *models.Site, queue string) error {
	if !vocab.QueueNameOK(queue) {
		v.Add(field, fmt.Sprintf("Must match [a-zA-Z0-9-_]+, at most %d characters.", web.MaxNameLen))
		return nil
	}
	known, err := models.SiteHasQueue(ctx, db, site.ID, queue)
	if err != nil {
		return err
	}
	v.Check(known, field, fmt.Sprintf("Site %s has no queue %q: use %s or a queue its workers serve (GET /api/queues/?site=%s).",
		site.Name, queue, vocab.DefaultQueue, site.Name))
	return nil
}

// jobPaths accepts paths as strings or {"path": ...} objects. Every path is
// absolute inside the site root; ".." and NUL are refused here, symlinks
// leaving the root are refused by the site worker, per path.
func jobPaths(v web.ValidationError, raw []any) []string {
	var out []string
	for i, p := range raw {
		var s string
		switch x := p.(type) {
		case string:
			s = x
		case map[string]any:
			s, _ = x["path"].(string)
		}
		field := fmt.Sprintf("paths[%d]", i)
		switch {
		case s == "":
			v.Add(field, "Each path must be a non-empty string or an object with a path.")
		case !strings.HasPrefix(s, "/"):
			v.Add(field, "Paths are absolute inside the site root and start with /.")
		case strings.ContainsRune(s, 0) || containsDotDot(s):
			v.Add(field, "Paths may not contain .. or NUL.")
		default:
			out = append(out, s)
		}
	}
	return out
}

func containsDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// checkFields validates runtime fields against the definition and fills
// defaults.
func checkFields(v web.ValidationError, defs map[string]models.WorkflowField, given map[string]any) map[string]any {
	out := map[string]any{}
	for name := range given {
		if _, ok := defs[name]; !ok {
			v.Add("fields."+name, "Unknown field for this workflow.")
		}
	}
	for name, f := range defs {
		val, ok := given[name]
		if !ok || val == nil {
			if f.Required && f.Default == nil {
				v.Add("fields."+name, "This field is required.")
			}
			if f.Default != nil {
				out[name] = f.Default
			}
			continue
		}
		switch f.Type {
		case "number":
			if _, isNum := val.(float64); !isNum {
				if n, isJSON := val.(interface{ Float64() (float64, error) }); isJSON {
					fv, _ := n.Float64()
					val = fv
				} else {
					v.Add("fields."+name, "Expected a number.")
				}
			}
		case "checkbox":
			if _, ok := val.(bool); !ok {
				v.Add("fields."+name, "Expected a boolean.")
			}
		case "choice":
			found := false
			for _, c := range f.Choices {
				found = found || fmt.Sprint(c) == fmt.Sprint(val)
			}
			if !found {
				v.Add("fields."+name, fmt.Sprintf("%v is not one of the choices.", val))
			}
		default:
			if _, ok := val.(string); !ok {
				v.Add("fields."+name, "Expected a string.")
			}
		}
		out[name] = val
	}
	return out
}

// newJob validates a job request and builds the job record.
func (s *Server) newJob(c *gin.Context, in runWorkflowInput) (*models.Job, error) {
	ctx := c.Request.Context()
	v := web.ValidationError{}
	v.Check(deref(in.Site) != "", "site", "This field is required.")
	v.Check(deref(in.Workflow) != "", "workflow", "This field is required.")
	if err := v.Err(); err != nil {
		return nil, err
	}
	site, err := models.GetSiteByName(ctx, s.DB, *in.Site)
	if isNotFound(err) {
		v.Add("site", fmt.Sprintf("Site %q does not exist.", *in.Site))
	} else if err != nil {
		return nil, err
	}
	wf, err := models.GetWorkflowByName(ctx, s.DB, *in.Workflow)
	if isNotFound(err) {
		v.Add("workflow", fmt.Sprintf("Workflow %q does not exist.", *in.Workflow))
	} else if err != nil {
		return nil, err
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	v.Check(wf.Enabled, "workflow", "This workflow is disabled.")
	v.Check(!wf.ScheduleOnly, "workflow", "This workflow can only run inside a schedule.")
	discovery := deref(wf.Discovery)
	if in.Discovery != nil {
		discovery = *in.Discovery
	}
	if discovery == "none" {
		discovery = ""
	}
	v.Check(discovery == "" || discovery == "recursive" || discovery == "snapdiff", "discovery", "Use recursive, snapdiff or none.")
	paths := jobPaths(v, in.Paths)
	v.Check(len(in.Paths) > 0, "paths", "At least one path is required.")
	v.Check(discovery != "snapdiff" || len(in.Paths) == 1, "paths", "Snapdiff discovery takes exactly one managed path.")
	fields := checkFields(v, wf.Fields, in.Fields)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if err := s.checkDestinations(c.Request.Context(), v, wf, site, fields); err != nil {
		return nil, err
	}
	queue := wf.PreferredQueue
	if in.Queue != nil {
		queue = *in.Queue
	}
	if queue == "" {
		queue = vocab.DefaultQueue
	}
	if err := checkQueue(ctx, s.DB, v, "queue", site, queue); err != nil {
		return nil, err
	}
	for i, g := range append(append([]string{}, in.Include...), in.Exclude...) {
		v.Check(g != "", fmt.Sprintf("include/exclude[%d]", i), "Globs may not be empty.")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	j := &models.Job{Workflow: wf.Name, Site: site.Name, SiteID: site.ID, Queue: queue, Fields: fields, Paths: paths,
		Include: in.Include, Exclude: in.Exclude, IgnoreSiteIncludes: in.IgnoreSiteIncludes, IgnoreSiteExcludes: in.IgnoreSiteExcludes,
		Definition: models.JobDefinition{Name: wf.Name, Discovery: discovery, DiscoveryOptions: wf.DiscoveryOptions,
			FilterRules: wf.FilterRules, PreferredQueue: wf.PreferredQueue},
		FriendlyName: fmt.Sprintf("%s on %s", wf.Label, site.Name)}
	if discovery != "" {
		j.Discovery = &discovery
	}
	p := auth.Current(c)
	j.OwnerType, j.OwnerID, j.OwnerName = models.OwnerUser, &p.User.ID, p.User.Username
	if p.ClientKey != nil {
		j.ClientKeyID, j.ClientKeyName = &p.ClientKey.ID, p.ClientKey.Name
	}
	return j, nil
}

// checkDestinations refuses a send or site_sync whose destination site
// (a literal or a "$field") does not exist or is the job's own site, or
// whose destination queue is not a known queue of that site.
func (s *Server) checkDestinations(ctx context.Context, v web.ValidationError, wf *models.Workflow, site *models.Site, fields map[string]any) error {
	for _, r := range wf.FilterRules {
		for _, st := range r.Action {
			dest, _ := st.Params["destination_site"].(string)
			field := "destination_site"
			if name, ok := strings.CutPrefix(dest, "$"); ok {
				field = "fields." + name
				dest, _ = fields[name].(string)
			}
			if st.Name != "send" && st.Name != "site_sync" {
				continue
			}
			destSite, err := models.GetSiteByName(ctx, s.DB, dest)
			switch {
			case isNotFound(err):
				v.Add(field, fmt.Sprintf("Site %q does not exist.", dest))
				continue
			case err != nil:
				return err
			case dest == site.Name:
				v.Add(field, "The destination must be another site.")
				continue
			}
			queue, _ := st.Params["destination_queue"].(string)
			qfield := "destination_queue"
			if name, ok := strings.CutPrefix(queue, "$"); ok {
				qfield = "fields." + name
				queue, _ = fields[name].(string)
			}
			if queue == "" {
				queue = vocab.DefaultQueue
			}
			if err := checkQueue(ctx, s.DB, v, qfield, destSite, queue); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// createJob creates job j, or, when the request's Idempotency-Key was
// used by the same user before, makes j that earlier job: a client that
// retries a request whose answer it lost gets one job, not two.
func (s *Server) createJob(c *gin.Context, j *models.Job) error {
	if key := c.GetHeader("Idempotency-Key"); key != "" {
		if len(key) > maxIdempotencyKey {
			return web.Invalid("Idempotency-Key", fmt.Sprintf("At most %d characters.", maxIdempotencyKey))
		}
		j.IdempotencyKey = &key
	}
	_, err := s.Changes.CreateJob(c.Request.Context(), j)
	return err
}

func (s *Server) runWorkflow(c *gin.Context) error {
	var in runWorkflowInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	j, err := s.newJob(c, in)
	if err != nil {
		return err
	}
	if err := s.createJob(c, j); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, runWorkflowResponse{Site: j.Site, Workflow: j.Workflow, Discovery: j.Discovery, Job: j.ID,
		Fields: j.Fields, Paths: j.Paths, Include: j.Include, Exclude: j.Exclude, Queue: j.Queue,
		IgnoreSiteIncludes: j.IgnoreSiteIncludes, IgnoreSiteExcludes: j.IgnoreSiteExcludes,
		URL: web.AbsURL(c, fmt.Sprintf("/api/jobs/%d/", j.ID))})
	return nil
}

// createJobOld is POST /jobs/ with the older body: jobtype instead of
// workflow; state is ignored (a job always starts PENDING).
func (s *Server) createJobOld(c *gin.Context) error {
	var in runWorkflowInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	if in.Workflow == nil {
		in.Workflow = in.JobType
	}
	if in.Workflow == nil {
		return web.Invalid("jobtype", "This field is required.")
	}
	j, err := s.newJob(c, in)
	var v web.ValidationError
	if errors.As(err, &v) && in.JobType != nil && v["workflow"] != nil {
		// The older body names the workflow jobtype: so do its errors.
		v["jobtype"] = append(v["jobtype"], v["workflow"]...)
		delete(v, "workflow")
	}
	if err != nil {
		return err
	}
	if err := s.createJob(c, j); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, renderJob(c, j))
	return nil
}

// renderJob is a job as the API shows it, with both the newer (workflow,
// owner object) and older (jobtype) field names.
func renderJob(c *gin.Context, j *models.Job) jobResponse {
	var runtime *float64
	if j.Started != nil {
		end := time.Now()
		if j.Completed != nil {
			end = *j.Completed
		}
		r := end.Sub(*j.Started).Seconds()
		runtime = &r
	}
	owner := jobOwnerRef{Type: j.OwnerType, ID: j.OwnerID, Name: j.OwnerName}
	switch j.OwnerType {
	case models.OwnerSystem:
		id := int64(models.OwnerSystemID)
		owner.ID, owner.Name = &id, "System"
	case models.OwnerUnknown:
		id := int64(models.OwnerUnknownID)
		owner.ID, owner.Name = &id, "Unknown"
	}
	var clientKey, schedule *string
	if j.ClientKeyID != nil {
		clientKey = &j.ClientKeyName
	}
	if j.ScheduleID != nil {
		schedule = &j.ScheduleName
	}
	return jobResponse{
		ID: j.ID, URL: web.AbsURL(c, fmt.Sprintf("/api/jobs/%d/", j.ID)), Workflow: j.Workflow, JobType: j.Workflow,
		Site: j.Site, Queue: j.Queue, Discovery: j.Discovery, Fields: j.Fields, State: j.State,
		HasFailures: j.HasFailures, Error: web.CleanErrorText(j.Error), Created: j.Created, Started: j.Started, Completed: j.Completed,
		Runtime: runtime, Owner: owner, ClientKey: clientKey, Schedule: schedule,
		DirWalkComplete: j.DirWalkComplete, IsSettingsJob: j.IsSettingsJob, FriendlyName: j.FriendlyName,
		Progress: j.Progress, Paths: j.Paths, Include: j.Include, Exclude: j.Exclude, Run: j.Run,
		NumFiles: j.NumFiles, NumProcessedFiles: j.NumProcessedFiles, NumFailedFiles: j.NumFailedFiles,
		NumSkippedFiles: j.NumSkippedFiles, NumAbortedFiles: j.NumAbortedFiles, NumCancelledFiles: j.NumCancelledFiles,
		TemporalWorkflowID: workflows.JobWorkflowID(j.ID),
	}
}

func (s *Server) jobFromPath(c *gin.Context) (*models.Job, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetJob(c.Request.Context(), s.DB, id)
}

func (s *Server) getJob(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderJob(c, j))
	return nil
}

var errJobNotRunning = changes.ErrJobNotRunning

// signalJob sends pause or resume to a running job's workflow.
func (s *Server) signalJob(signal string) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		j, err := s.jobFromPath(c)
		if err != nil {
			return err
		}
		if vocab.JobFinished(j.State) || j.State == vocab.JobCancelling {
			return errJobNotRunning
		}
		if err := s.Changes.SignalJob(c.Request.Context(), j.ID, signal); err != nil {
			return err
		}
		c.JSON(http.StatusAccepted, renderJob(c, j))
		return nil
	}
}

// cancelJob asks the job's workflow to cancel (changes.CancelJob): 202
// with the job, CANCELLING or already ended.
func (s *Server) cancelJob(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	if vocab.JobFinished(j.State) {
		return errJobNotRunning
	}
	ctx := c.Request.Context()
	if err := s.Changes.CancelJob(ctx, j); err != nil {
		return err
	}
	if j, err = models.GetJob(ctx, s.DB, j.ID); err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, renderJob(c, j))
	return nil
}

// resubmitJob reruns what a finished job failed, aborted or had cancelled.
// An unfinished job, or one with nothing left to redo, is unchanged (200);
// one whose queue is no longer a known queue of its site is a 400.
func (s *Server) resubmitJob(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	if !vocab.JobFinished(j.State) || (j.State == vocab.JobSuccess && !j.HasFailures) {
		c.JSON(http.StatusOK, renderJob(c, j))
		return nil
	}
	ctx := c.Request.Context()
	site, err := models.GetJobSite(ctx, s.DB, j)
	if isNotFound(err) {
		return web.Invalid("site", fmt.Sprintf("Site %q no longer exists.", j.Site))
	} else if err != nil {
		return err
	}
	v := web.ValidationError{}
	if err := checkQueue(ctx, s.DB, v, "queue", site, j.Queue); err != nil {
		return err
	}
	if err := v.Err(); err != nil {
		return err
	}
	if err := s.Changes.ResubmitJob(ctx, j); err != nil {
		return err
	}
	if j, err = models.GetJob(ctx, s.DB, j.ID); err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, renderJob(c, j))
	return nil
}

// deleteJob removes a finished (or CANCELLING) job's records and its
// batch files at the site (changes.DeleteJob); a running job is a 409.
func (s *Server) deleteJob(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	if err := s.Changes.DeleteJob(c.Request.Context(), j); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
