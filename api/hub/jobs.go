package hub

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

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

// jobPaths accepts paths as strings or {"path": ...} objects; anything
// else becomes "", which changes.CheckPaths refuses by its index.
func jobPaths(raw []any) []string {
	out := make([]string, len(raw))
	for i, p := range raw {
		switch x := p.(type) {
		case string:
			out[i] = x
		case map[string]any:
			out[i], _ = x["path"].(string)
		}
	}
	return out
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// submitJob asks for the job a request describes, on behalf of the
// caller (changes.SubmitJob). When the request's Idempotency-Key was used
// by the same user before, the answer is that earlier job: a client that
// retries a request whose answer it lost gets one job, not two.
func (s *Server) submitJob(c *gin.Context, in runWorkflowInput) (*models.Job, error) {
	p := auth.Current(c)
	req := changes.JobRequest{Site: deref(in.Site), Workflow: deref(in.Workflow), Discovery: in.Discovery,
		Fields: in.Fields, Paths: jobPaths(in.Paths), Include: in.Include, Exclude: in.Exclude,
		IgnoreSiteIncludes: in.IgnoreSiteIncludes, IgnoreSiteExcludes: in.IgnoreSiteExcludes, Queue: in.Queue,
		Owner: changes.JobOwner{UserID: &p.User.ID, UserName: p.User.Username}}
	if p.ClientKey != nil {
		req.Owner.ClientKeyID, req.Owner.ClientKeyName = &p.ClientKey.ID, p.ClientKey.Name
	}
	if key := c.GetHeader("Idempotency-Key"); key != "" {
		if len(key) > maxIdempotencyKey {
			return nil, web.Invalid("Idempotency-Key", fmt.Sprintf("At most %d characters.", maxIdempotencyKey))
		}
		req.IdempotencyKey = &key
	}
	j, _, err := s.Changes.SubmitJob(c.Request.Context(), req)
	return j, err
}

func (s *Server) runWorkflow(c *gin.Context) error {
	var in runWorkflowInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	j, err := s.submitJob(c, in)
	if err != nil {
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
	j, err := s.submitJob(c, in)
	var v web.ValidationError
	if errors.As(err, &v) && in.JobType != nil && v["workflow"] != nil {
		// The older body names the workflow jobtype: so do its errors.
		v["jobtype"] = append(v["jobtype"], v["workflow"]...)
		delete(v, "workflow")
	}
	if err != nil {
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

// jobToChange is jobFromPath for a write: a caller changes only its own
// jobs, unless it holds manage_job (models.PermManageJobs).
func (s *Server) jobToChange(c *gin.Context) (*models.Job, error) {
	j, err := s.jobFromPath(c)
	if err != nil {
		return nil, err
	}
	p := auth.Current(c)
	if p.Can(models.PermManageJobs) || (j.OwnerType == models.OwnerUser && j.OwnerID != nil && *j.OwnerID == p.User.ID) {
		return j, nil
	}
	return nil, web.Errorf(http.StatusForbidden, "You can change only your own jobs (%s lets a user change every job).", models.PermManageJobs)
}

func (s *Server) getJob(c *gin.Context) error {
	j, err := s.jobFromPath(c)
	if err != nil {
		return err
	}
	out := renderJob(c, j)
	if !vocab.JobFinished(j.State) {
		// A running job's progress moves as files finish inside a batch
		// (lists show the stored figure, which moves per batch).
		p, err := s.progressOf(c.Request.Context(), j)
		if err != nil {
			return err
		}
		out.Progress = p.Progress
	}
	c.JSON(http.StatusOK, out)
	return nil
}

var errJobNotRunning = changes.ErrJobNotRunning

// signalJob sends pause or resume to a running job's workflow.
func (s *Server) signalJob(signal string) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		j, err := s.jobToChange(c)
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
	j, err := s.jobToChange(c)
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
	j, err := s.jobToChange(c)
	if err != nil {
		return err
	}
	if !vocab.JobFinished(j.State) || (j.State == vocab.JobSuccess && !j.HasFailures) {
		c.JSON(http.StatusOK, renderJob(c, j))
		return nil
	}
	ctx := c.Request.Context()
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
	j, err := s.jobToChange(c)
	if err != nil {
		return err
	}
	if err := s.Changes.DeleteJob(c.Request.Context(), j); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
