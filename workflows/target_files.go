package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// TargetFilesWorkflowName is the registered name of TargetFilesWorkflow.
const TargetFilesWorkflowName = "TargetFilesWorkflow"

// TargetFilesInput asks for one page of an external target's content.
// With Site set, the listing runs there (a filesystem target is a folder
// mounted at the sites) with Config, which then holds no credentials;
// otherwise the hub lists the target itself with the credentials it keeps.
type TargetFilesInput struct {
	TargetID int64
	Site     string
	Listing  site.TargetListInput
}

// listOptions: a listing answers an HTTP request, so it fails fast.
var listOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: time.Minute,
	RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
}

// TargetFilesWorkflow runs one listing activity and returns its page.
func TargetFilesWorkflow(ctx workflow.Context, in TargetFilesInput) (site.TargetListing, error) {
	var out site.TargetListing
	opts := listOptions
	if in.Site != "" {
		var siteActs *site.Activities
		opts.TaskQueue = SiteTaskQueue(in.Site, "default")
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), siteActs.ListTargetFolder, in.Listing).Get(ctx, &out)
		return out, err
	}
	opts.TaskQueue = HubTaskQueue
	l := in.Listing
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), actListRemoteTarget,
		RemoteListInput{TargetID: in.TargetID, Path: l.Path, MaxItems: l.MaxItems, Marker: l.Marker}).Get(ctx, &out)
	return out, err
}
