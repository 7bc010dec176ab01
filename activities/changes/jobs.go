package changes

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// ErrJobNotRunning: the job has no workflow that can take the request.
var ErrJobNotRunning = errors.New("the job is not running")

// ErrJobRunning: the job must end (or be cancelled) first.
var ErrJobRunning = errors.New("the job is still running")

// CreateJob records job j (PENDING, run 1) and starts its workflow. A
// job with an idempotency key its owner used before is not created again:
// j becomes that job, and existed is true.
func (s *Service) CreateJob(ctx context.Context, j *models.Job) (existed bool, err error) {
	if j.IdempotencyKey != nil {
		if prev, err := models.GetJobByKey(ctx, s.DB, j.OwnerID, *j.IdempotencyKey); err == nil {
			*j = *prev
			return true, nil
		}
	}
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.CreateJob(ctx, tx, j); err != nil {
			return err
		}
		return tx.Owe(ctx, KindJobStart, j.ID, JobStart{Run: j.Run})
	})
	if errors.Is(err, models.ErrConflict) && j.IdempotencyKey != nil {
		// The same request (or firing), sent at the same time, won the
		// race.
		prev, gerr := models.GetJobByKey(ctx, s.DB, j.OwnerID, *j.IdempotencyKey)
		if gerr == nil {
			*j = *prev
			return true, nil
		}
	}
	return false, err
}

// ResubmitJob starts a new run of finished job j over what it left undone.
// A job whose site is gone, whose queue is no longer a known queue of
// its site, is refused (models.FieldErrors).
func (s *Service) ResubmitJob(ctx context.Context, j *models.Job) error {
	site, err := models.GetJobSite(ctx, s.DB, j)
	if errors.Is(err, models.ErrNotFound) {
		return models.Invalid("site", fmt.Sprintf("Site %q no longer exists.", j.Site))
	} else if err != nil {
		return err
	}
	v := models.FieldErrors{}
	if err := CheckQueue(ctx, s.DB, v, "queue", site, j.Queue); err != nil {
		return err
	}
	if !j.IsSettingsJob {
		// As a new job of its workflow would be (a reviewer's finding: a
		// resubmit ran a workflow an administrator had disabled since).
		wf, err := models.GetWorkflowByName(ctx, s.DB, j.Workflow)
		switch {
		case errors.Is(err, models.ErrNotFound):
			v.Add("workflow", fmt.Sprintf("Workflow %q no longer exists.", j.Workflow))
		case err != nil:
			return err
		default:
			v.Check(wf.Enabled, "workflow", "This workflow is disabled.")
			v.Check(!wf.ScheduleOnly || j.ScheduleID != nil, "workflow", "This workflow can only run inside a schedule.")
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		run := j.Run + 1
		if err := models.UpdateJob(ctx, tx, j.ID, models.JobUpdate{State: vocab.JobPending, Run: &run}); err != nil {
			return err
		}
		return tx.Owe(ctx, KindJobStart, j.ID, JobStart{Run: run})
	})
}

// SignalJob sends pause or resume to job id's running workflow; both are
// idempotent, so a signal sent twice is harmless. Each carries its number
// (models.NextSignal), so that the workflow applies the last one asked
// for (JobCarry.SignalSeq).
func (s *Service) SignalJob(ctx context.Context, id int64, signal string) error {
	seq, err := models.NextSignal(ctx, s.DB, id)
	if err != nil {
		return err
	}
	err = s.Temporal.SignalWorkflow(ctx, workflows.JobWorkflowID(id), "", signal, seq)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return ErrJobNotRunning
	}
	return err
}

// stuckTaskAttempts is how many times in a row a workflow task must have
// failed for the workflow to count as unable to act on a cancel request.
// One failure may be a worker that died; a task that keeps failing (a
// command Temporal refuses, a bug) never recovers by itself.
const stuckTaskAttempts = 3

// CancelJob records job j CANCELLING and asks its workflow to cancel:
// steps in flight stop at their next heartbeat and the workflow records
// the job CANCELLED. A workflow that cannot act on the request (gone, or
// its task failing) is ended by the hub instead (EndJob), so any job can
// be cancelled whatever went wrong.
func (s *Service) CancelJob(ctx context.Context, j *models.Job) error {
	// Asked before the request is sent too: a cancel request that reaches
	// a workflow while its failing task runs makes Temporal count that
	// task's attempts from 1 again, so afterwards a stuck workflow can look
	// like one about to act.
	stuck, _ := s.jobWorkflowStuck(ctx, j.ID) // an error: asked again below
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.MarkCancelling(ctx, tx, j.ID); err != nil {
			return err
		}
		return tx.Owe(ctx, KindJobCancel, j.ID, struct{}{})
	})
	if err != nil {
		return err
	}
	if !stuck {
		stuck, err = s.jobWorkflowStuck(ctx, j.ID)
	}
	if err != nil {
		// Temporal cannot say: the cancel is committed and owed, and a
		// cancel sent again checks once more.
		s.Log.Warn("cancel committed; whether the job's workflow can act on it is unknown", "job", j.ID, "error", err)
		return nil
	}
	if !stuck {
		return nil
	}
	return s.EndJob(ctx, j, "cancelled by the API: the workflow could not act on the cancel request")
}

// jobWorkflowStuck reports whether job id's workflow cannot record the
// job's end itself: it is gone, it closed without recording it, or its
// workflow task keeps failing. A start still owed (Temporal was away) is
// not stuck: the reconciler delivers it, and the run then sees the
// cancel.
func (s *Service) jobWorkflowStuck(ctx context.Context, id int64) (bool, error) {
	owed, err := models.IntentsOf(ctx, s.DB, KindJobStart, id)
	if err != nil || len(owed) > 0 {
		return false, err
	}
	d, err := s.Temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(id), "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return true, nil
	case err != nil:
		return false, err
	case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return true, nil // closed, yet the record is not finished
	}
	return d.GetPendingWorkflowTask().GetAttempt() >= stuckTaskAttempts, nil
}

// EndJob ends job j without its workflow: it terminates the workflow if
// it still runs, then records the job CANCELLED with its open tasks
// cancelled, unless the workflow recorded an end first. Which batches the
// workflow had not run yet is lost with it, so a resubmit discovers the
// job again from scratch (steps already done report "already ..."),
// never only the failed paths: that would call the job done with batches
// never run.
func (s *Service) EndJob(ctx context.Context, j *models.Job, reason string) error {
	ctx = context.WithoutCancel(ctx) // ended even if the client goes away
	err := s.Temporal.TerminateWorkflow(ctx, workflows.JobWorkflowID(j.ID), "", reason)
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return err
	}
	s.Log.Warn("job ended by the hub", "job", j.ID, "reason", reason)
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		cur, err := models.GetJob(ctx, tx, j.ID)
		if err != nil || vocab.JobFinished(cur.State) {
			return err // the workflow recorded the end after all
		}
		// Nothing owed to the job's workflow is delivered any more.
		if _, err := tx.NewDelete().Model((*models.Intent)(nil)).Where("ref_id = ? AND kind IN (?, ?)", j.ID, KindJobStart, KindJobCancel).Exec(ctx); err != nil {
			return err
		}
		if err := models.CancelOpenTasks(ctx, tx, j.ID); err != nil {
			return err
		}
		if err := models.RefreshJobCounts(ctx, tx, j.ID); err != nil {
			return err
		}
		failures, walked, left := true, false, []vocab.BatchRef{}
		return models.UpdateJob(ctx, tx, j.ID, models.JobUpdate{State: vocab.JobCancelled, Completed: true, HasFailures: &failures,
			DirWalkComplete: &walked, Leftover: &left})
	})
}

// DeleteJob removes a finished job's records (a CANCELLING one is ended
// first: its owner wants it gone whatever its workflow does) and has its
// batch files at the site removed. A running job is ErrJobRunning.
func (s *Service) DeleteJob(ctx context.Context, j *models.Job) error {
	switch {
	case j.State == vocab.JobCancelling:
		if err := s.EndJob(ctx, j, "deleted by the API while cancelling"); err != nil {
			return err
		}
	case !vocab.JobFinished(j.State):
		return ErrJobRunning
	}
	queue := j.Queue
	if !vocab.QueueNameOK(queue) {
		queue = vocab.DefaultQueue
	}
	site := s.jobSiteName(ctx, j)
	cleanup, err := NewStart(workflows.JobCleanupWorkflowID(j.ID), workflows.JobCleanupWorkflowName,
		workflows.JobCleanup{Site: site, Queue: queue, JobIDs: []int64{j.ID}})
	if err != nil {
		return err
	}
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.DeleteJob(ctx, tx, j.ID); err != nil {
			return err
		}
		return tx.Owe(ctx, KindStart, j.ID, cleanup)
	})
}

// jobSiteName is the current name of job j's site (it may have been
// renamed since the job was created), or the name it had then if the site
// is gone.
func (s *Service) jobSiteName(ctx context.Context, j *models.Job) string {
	if cur, err := models.GetJobSite(ctx, s.DB, j); err == nil {
		return cur.Name
	}
	return j.Site
}
