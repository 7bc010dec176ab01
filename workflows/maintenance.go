package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	hubact "github.com/thehub/hub/activities/hub"
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
func MaintenanceWorkflow(ctx workflow.Context) (hubact.MaintenanceResult, error) {
	ctx = workflow.WithActivityOptions(ctx, hubOptions)
	var a *hubact.Activities
	var res hubact.MaintenanceResult
	err := workflow.ExecuteActivity(ctx, a.Maintain).Get(ctx, &res)
	return res, err
}
