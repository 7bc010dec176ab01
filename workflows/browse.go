package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// BrowseWorkflowName is the registered name of BrowseWorkflow.
const BrowseWorkflowName = "BrowseWorkflow"

// BrowseInput lists a directory at a site.
type BrowseInput struct {
	Site, Queue string
	List        site.ListDirInput
	Timeout     time.Duration // stat_timeout
}

// BrowseWorkflow asks a site worker for a directory listing: the file
// browser's only way to a site's storage, since the hub never mounts it.
func BrowseWorkflow(ctx workflow.Context, in BrowseInput) (*site.ListDirOutput, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: SiteTaskQueue(in.Site, in.Queue),
		// A listing is only useful now: no worker within the timeout means
		// the caller gets an error, not a late answer.
		ScheduleToCloseTimeout: in.Timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	var s *site.Activities
	var out site.ListDirOutput
	err := workflow.ExecuteActivity(ctx, s.ListDir, in.List).Get(ctx, &out)
	return &out, err
}
