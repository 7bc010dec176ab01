package changes

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows"
)

// WorkflowError is the failure of a short workflow a caller waited for (a
// listing, a refresh). What names the operation for the client ("Site
// s1"); the API turns it into a client error in one place (api/web).
type WorkflowError struct {
	What string
	Err  error
}

func (e *WorkflowError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *WorkflowError) Unwrap() error { return e.Err }

// Short is a short workflow run for an answer: it changes no record, so
// it needs no intent.
type Short struct {
	What     string // the operation, for errors
	ID       string
	Workflow string
	Input    any
	// Timeout bounds the workflow run; Wait bounds how long the caller
	// waits for it (0: as long as the context allows).
	Timeout, Wait time.Duration
	// Join joins a run already going with the same ID.
	Join bool
}

// RunShort runs w and decodes its result into result. done is false when
// the run goes on after w.Wait; its id is w.ID.
func (s *Service) RunShort(ctx context.Context, w Short, result any) (done bool, err error) {
	opts := client.StartWorkflowOptions{ID: w.ID, TaskQueue: workflows.HubTaskQueue, WorkflowExecutionTimeout: w.Timeout}
	if w.Join {
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	}
	run, err := s.Temporal.ExecuteWorkflow(ctx, opts, w.Workflow, w.Input)
	if err != nil {
		return false, err
	}
	wctx := ctx
	if w.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, w.Wait)
		defer cancel()
	}
	err = awaitResult(wctx, s.Temporal, run, result)
	if err == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	// The wait may end in a deadline or a long-poll timeout error: only the
	// workflow's own status tells a failure from "not finished yet".
	desc, derr := s.Temporal.DescribeWorkflowExecution(context.WithoutCancel(ctx), run.GetID(), run.GetRunID())
	if derr == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, nil
	}
	s.Log.Warn("workflow failed", "what", w.What, "workflow_id", w.ID, "error", err)
	return false, &WorkflowError{What: w.What, Err: err}
}

// closeCheck is how often a wait for a workflow's result asks whether the
// workflow has closed. The Temporal server's long poll on a close can miss
// it (its history service drops a notification that comes while the poll
// still holds the one before; seen under load, a 100 ms listing answered
// after 20 s) and then waits out its 20 s.
const closeCheck = time.Second

// awaitResult is run.Get, with a describe every closeCheck that notices a
// close the long poll missed.
func awaitResult(ctx context.Context, c client.Client, run client.WorkflowRun, result any) error {
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	got := make(chan error, 1)
	go func() { got <- run.Get(pollCtx, result) }()
	tick := time.NewTicker(closeCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-got:
			if pollCtx.Err() != nil && ctx.Err() == nil {
				// Stopped below: the run has closed, so this answers at once.
				return run.Get(ctx, result)
			}
			return err
		case <-tick.C:
			d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
			if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				stopPoll()
			}
		}
	}
}

// JobProgress asks job id's workflow for its live progress; ok is false
// when there is no live answer (no such workflow, no worker).
func (s *Service) JobProgress(ctx context.Context, id int64, wait time.Duration) (p workflows.JobProgress, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	v, err := s.Temporal.QueryWorkflow(ctx, workflows.JobWorkflowID(id), "", workflows.ProgressQuery)
	if err != nil || v.Get(&p) != nil {
		return p, false
	}
	return p, true
}

// JobSteps reads the progress of job id's steps in flight from the
// heartbeat details of its pending RunStep activities (site.StepProgress):
// the workflow cannot see them, the server keeps the latest of each. ok is
// false when there is no answer (no such workflow, Temporal down).
func (s *Service) JobSteps(ctx context.Context, id int64, wait time.Duration) (steps []site.StepProgress, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	d, err := s.Temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(id), "")
	if err != nil {
		return nil, false
	}
	dc := converter.GetDefaultDataConverter()
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() != stepActivity || a.GetHeartbeatDetails() == nil {
			continue
		}
		var p site.StepProgress
		// A step of a worker from before StepProgress heartbeats a bare count.
		if dc.FromPayloads(a.GetHeartbeatDetails(), &p) == nil && p.Files > 0 {
			steps = append(steps, p)
		}
	}
	return steps, true
}

// stepActivity is the registered name of site.Activities.RunStep.
const stepActivity = "RunStep"

// TemporalHealthy tells whether the Temporal frontend answers.
func (s *Service) TemporalHealthy(ctx context.Context) error {
	_, err := s.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
