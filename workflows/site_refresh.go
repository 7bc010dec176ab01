package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// SiteRefreshWorkflowName is the registered name of SiteRefreshWorkflow.
const SiteRefreshWorkflowName = "SiteRefreshWorkflow"

// SiteRefreshWorkflowID is one refresh per site at a time: a second request
// while one runs joins it.
func SiteRefreshWorkflowID(site string) string { return "site-refresh-" + site }

// SiteRefreshInput names the site to refresh and the queue that answers.
type SiteRefreshInput struct {
	SiteID int64
	Site   string
	Queue  string
}

// SiteRefreshResult is the inventory the site reported and the hub stored.
type SiteRefreshResult struct {
	Inventory site.Inventory
}

// catalogueHubOptions: quick database writes, retried through a database
// restart for a few minutes.
var catalogueHubOptions = workflow.ActivityOptions{
	TaskQueue:           HubTaskQueue,
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 20},
}

// inventoryOptions: a walk of a large root takes long but heartbeats every
// batch; a site with no live worker fails the refresh after
// ScheduleToStart rather than leaving it pending for ever.
func inventoryOptions(site, queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              SiteTaskQueue(site, queue),
		ScheduleToStartTimeout: 5 * time.Minute,
		StartToCloseTimeout:    6 * time.Hour,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3, MaximumInterval: time.Minute},
	}
}

// SiteRefreshWorkflow asks the site for its counts, pools and server, then
// stores them at the hub.
func SiteRefreshWorkflow(ctx workflow.Context, in SiteRefreshInput) (SiteRefreshResult, error) {
	var res SiteRefreshResult
	var siteActs *site.Activities
	sctx := workflow.WithActivityOptions(ctx, inventoryOptions(in.Site, in.Queue))
	if err := workflow.ExecuteActivity(sctx, siteActs.InventorySite).Get(ctx, &res.Inventory); err != nil {
		return res, fmt.Errorf("inventory of site %s: %w", in.Site, err)
	}
	hctx := workflow.WithActivityOptions(ctx, catalogueHubOptions)
	err := workflow.ExecuteActivity(hctx, actStoreSiteInventory, SiteInventoryInput{SiteID: in.SiteID, Inventory: res.Inventory}).Get(ctx, nil)
	return res, err
}
