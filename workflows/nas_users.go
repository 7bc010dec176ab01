package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// NASUsersSyncWorkflowName is the registered name of NASUsersSyncWorkflow.
const NASUsersSyncWorkflowName = "NASUsersSyncWorkflow"

// NASUsersSyncInput is the NAS user list and the sites to send it to.
type NASUsersSyncInput = NASUsers

// NASUsersSyncResult says, per site, how many users were applied or why not.
type NASUsersSyncResult struct {
	Applied map[string]int
	Errors  map[string]string
}

// NASUsersSyncWorkflow sends the NAS user list to every site at once; a
// site whose workers are down fails alone after its timeout.
func NASUsersSyncWorkflow(ctx workflow.Context, in NASUsersSyncInput) (NASUsersSyncResult, error) {
	res := NASUsersSyncResult{Applied: map[string]int{}, Errors: map[string]string{}}
	var s *site.Activities
	futures := make([]workflow.Future, len(in.Sites))
	for i, name := range in.Sites {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: SiteTaskQueue(name, "default"),
			// A site down for longer than this misses this sync; the next
			// sync (any user change or POST /users/sync/) catches it up.
			ScheduleToCloseTimeout: 30 * time.Minute,
			StartToCloseTimeout:    time.Minute,
			RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: time.Minute},
		})
		futures[i] = workflow.ExecuteActivity(actx, s.ApplyNASUsers, in.Users)
	}
	for i, name := range in.Sites {
		var n int
		if err := futures[i].Get(ctx, &n); err != nil {
			res.Errors[name] = err.Error()
			continue
		}
		res.Applied[name] = n
	}
	return res, nil
}
