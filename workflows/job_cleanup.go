package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// JobCleanupWorkflowName is the registered name of JobCleanupWorkflow.
const JobCleanupWorkflowName = "JobCleanupWorkflow"

// JobCleanupWait is how long a cleanup waits for an offline site worker.
const JobCleanupWait = 7 * 24 * time.Hour

// JobCleanupWorkflowID names the cleanup of one deleted job.
func JobCleanupWorkflowID(jobID int64) string { return fmt.Sprintf("job-%d-cleanup", jobID) }

// JobCleanupWorkflow removes, at their site, the batch files of jobs whose
// records were deleted or purged (a finished job keeps them while it can
// be resubmitted). An offline site worker is waited for, up to
// JobCleanupWait.
func JobCleanupWorkflow(ctx workflow.Context, in JobCleanup) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              SiteTaskQueue(in.Site, in.Queue),
		ScheduleToCloseTimeout: JobCleanupWait,
		StartToCloseTimeout:    10 * time.Minute,
	})
	var s *site.Activities
	return workflow.ExecuteActivity(ctx, s.CleanupJobs, in.JobIDs).Get(ctx, nil)
}
