package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Recurring things are Temporal Schedules, one per record, kept in step
// with the records by activities/changes (see docs/schedules-policies.md):
// "schedule-<id>" fires ScheduleWorkflow, "policy-<id>" fires
// PolicyWorkflow.
const (
	ScheduleWorkflowName = "ScheduleWorkflow"
	PolicyWorkflowName   = "PolicyWorkflow"
)

// ScheduleTemporalID is the ID of schedule id's Temporal Schedule; its
// firings' workflow IDs start with it too.
func ScheduleTemporalID(id int64) string { return fmt.Sprintf("schedule-%d", id) }

// PolicyTemporalID is the ID of policy id's Temporal Schedule.
func PolicyTemporalID(id int64) string { return fmt.Sprintf("policy-%d", id) }

// Fire asks for one firing of a schedule or a policy. Key names the
// firing (its workflow ID): the jobs a firing starts carry it, so an
// activity retried after a crash finds them instead of starting more.
type Fire struct {
	ID  int64
	Key string `json:",omitempty"`
}

// FireResult is what a firing started.
type FireResult struct {
	Jobs []int64
	// Skipped says why a policy's firing started nothing (no trigger
	// above its upper threshold).
	Skipped string `json:",omitempty"`
}

// firingWait bounds how long a firing waits for its jobs: a firing holds
// back the schedule's next one (overlap policy skip) until its jobs end.
const firingWait = 30 * 24 * time.Hour

func hubCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute, MaximumAttempts: 20},
	})
}

// waitJobs waits until every job has ended (or was deleted).
func waitJobs(ctx workflow.Context, jobs []int64) error {
	if len(jobs) == 0 {
		return nil
	}
	wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: firingWait,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute},
	})
	return workflow.ExecuteActivity(wctx, actWaitJobs, jobs).Get(ctx, nil)
}

// ScheduleWorkflow is one firing of a schedule: it starts one job per
// schedule workflow over the schedule's managed paths, then waits for them
// to end, so that the schedule's next firing, while they run, is skipped.
func ScheduleWorkflow(ctx workflow.Context, in Fire) (*FireResult, error) {
	in.Key = workflow.GetInfo(ctx).WorkflowExecution.ID
	var res FireResult
	if err := workflow.ExecuteActivity(hubCtx(ctx), actFireSchedule, in).Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, waitJobs(ctx, res.Jobs)
}
