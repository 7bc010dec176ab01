package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"
)

// Maintenance runs on a Temporal schedule, so operators see every pass in
// the UI and can pause or trigger it there.
const (
	MaintenanceWorkflowName = "MaintenanceWorkflow"
	MaintenanceScheduleID   = "hub-maintenance"
	// MaintenanceEvery is how often stuck jobs are looked for and old
	// ones purged; the alert thresholds are minutes, so five is enough.
	MaintenanceEvery = 5 * time.Minute
)

// MaintenanceWorkflow purges jobs older than jobs_ttl and raises the
// not-started / not-progressed job alerts.
func MaintenanceWorkflow(ctx workflow.Context) (MaintenanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, hubOptions)
	var res MaintenanceResult
	if err := workflow.ExecuteActivity(ctx, actMaintain).Get(ctx, &res); err != nil {
		return res, err
	}
	// The purged jobs' batch files go at their sites; a child per site
	// queue, left running when this pass ends, waits for an offline site.
	run := workflow.GetInfo(ctx).WorkflowExecution.RunID
	var started []workflow.ChildWorkflowFuture
	for _, c := range res.Cleanups {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        fmt.Sprintf("jobs-cleanup-%s-%s-%s", c.Site, c.Queue, run),
			ParentClosePolicy: enums.PARENT_CLOSE_POLICY_ABANDON,
		})
		started = append(started, workflow.ExecuteChildWorkflow(cctx, JobCleanupWorkflowName, c))
	}
	for _, f := range started {
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			return res, err
		}
	}
	return res, nil
}
