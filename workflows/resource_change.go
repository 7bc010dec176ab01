package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// ResourceChangeWorkflowName is the registered name of ResourceChangeWorkflow.
const ResourceChangeWorkflowName = "ResourceChangeWorkflow"

// ResourceChangeSignal carries a ResourceChange to an item's workflow. The
// API sends it with SignalWithStart, so the first change starts the
// workflow and later ones join the running one.
const ResourceChangeSignal = "cj-change"

// ResourceChangeWorkflowID is one workflow per C+J item, so that the
// changes of an item run one at a time, in order.
func ResourceChangeWorkflowID(typ string, itemID int64) string {
	return fmt.Sprintf("cj-%s-%d", typ, itemID)
}

// ResourceChangeInput names the item. Applied and Wanted carry the
// progress across continue-as-new.
type ResourceChangeInput struct {
	Site   string
	Type   string
	ItemID int64
	// Applied is the newest generation of the item already applied.
	Applied int64
	// Wanted is the newest generation signalled.
	Wanted int64
}

// ResourceChange says that the item reached Generation (a create, an
// update or a deletion stored by the API).
type ResourceChange struct {
	Generation int64
}

// cjHubOptions: database writes are quick; retry through a database
// restart for as long as it takes, since the item must not stay half-done.
var cjHubOptions = workflow.ActivityOptions{
	TaskQueue:           HubTaskQueue,
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
}

// cjSiteOptions: a snapshot copies a whole space, so the work may take
// long but heartbeats; a site whose workers do not take the change within
// ScheduleToStart fails it (ERRORED) rather than leaving it INPROGRESS
// forever. Transient failures (a space still being created, a busy disk)
// are retried a few times; CJFailure errors (a file in the way, a path
// leaving the root) are final.
var cjSiteOptions = workflow.ActivityOptions{
	ScheduleToStartTimeout: 30 * time.Minute,
	StartToCloseTimeout:    4 * time.Hour,
	HeartbeatTimeout:       time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        10 * time.Second,
		MaximumAttempts:        5,
		NonRetryableErrorTypes: []string{vocab.ErrCJ},
	},
}

// cjMaxChangesPerRun keeps a busy item's history short (about 16 events a
// change).
const cjMaxChangesPerRun = 100

// ResourceChangeWorkflow applies the changes of one C+J item: each moves
// the item PENDING → INPROGRESS → ACTIVE, or ERRORED with the cause in the
// item's log. The database holds the item's newest state; a change is
// applied by reading it, so signals that arrive while a change runs are
// coalesced into one more application of the newest state, never lost. The
// workflow ends when no change is left; Temporal refuses to complete a
// workflow that has unread signals, so a change signalled at that moment
// is read by the retried task.
func ResourceChangeWorkflow(ctx workflow.Context, in ResourceChangeInput) error {
	ch := workflow.GetSignalChannel(ctx, ResourceChangeSignal)
	wanted, applied := in.Wanted, in.Applied
	drain := func() {
		var c ResourceChange
		for ch.ReceiveAsync(&c) {
			wanted = max(wanted, c.Generation)
		}
	}
	for runs := 1; ; runs++ {
		drain()
		if wanted <= applied {
			return nil
		}
		gen, err := applyResourceChange(ctx, in)
		if err != nil {
			return err
		}
		applied = max(applied, gen)
		if runs >= cjMaxChangesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			drain()
			if wanted <= applied {
				return nil
			}
			next := in
			next.Applied, next.Wanted = applied, wanted
			return workflow.NewContinueAsNewError(ctx, ResourceChangeWorkflowName, next)
		}
	}
}

// applyResourceChange applies the item's newest state and returns its
// generation. An item already removed counts as applied for good.
func applyResourceChange(ctx workflow.Context, in ResourceChangeInput) (int64, error) {
	var st *site.Activities
	hubCtx := workflow.WithActivityOptions(ctx, cjHubOptions)

	var plan CJPlan
	if err := workflow.ExecuteActivity(hubCtx, actCJPrepareChange, in.ItemID).Get(ctx, &plan); err != nil {
		return 0, err
	}
	if !plan.Found {
		return 1<<62 - 1, nil
	}
	if err := workflow.ExecuteActivity(hubCtx, actCJStartChange, plan).Get(ctx, nil); err != nil {
		return 0, err
	}
	out := CJOutcome{ItemID: plan.ItemID, Generation: plan.Generation, Delete: plan.Delete,
		Message: "no work at the site for " + in.Type}
	if plan.SiteWork {
		siteCtx := workflow.WithActivityOptions(ctx, cjSiteOptions)
		siteCtx = workflow.WithTaskQueue(siteCtx, SiteTaskQueue(in.Site, vocab.DefaultQueue))
		var res site.CJResult
		err := workflow.ExecuteActivity(siteCtx, st.CJApply, plan.Change).Get(ctx, &res)
		out.Message = res.Message
		if err != nil {
			out.Error = siteFailure(in.Site, err)
		}
	}
	if err := workflow.ExecuteActivity(hubCtx, actCJFinishChange, out).Get(ctx, nil); err != nil {
		return 0, err
	}
	return plan.Generation, nil
}

// siteFailure turns a site activity's error into a sentence for the log.
func siteFailure(siteName string, err error) string {
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &app):
		return app.Message()
	case errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return fmt.Sprintf("no worker of site %s took the change within %s", siteName, cjSiteOptions.ScheduleToStartTimeout)
	case errors.As(err, &timeout):
		return fmt.Sprintf("the site %s did not finish in time (%s timeout)", siteName, timeout.TimeoutType())
	}
	return err.Error()
}

// CJDatastoresWorkflowName is the registered name of CJDatastoresWorkflow.
const CJDatastoresWorkflowName = "CJDatastoresWorkflow"

// CJDatastoresWorkflowID is one refresh per site at a time; concurrent
// requests share the running one.
func CJDatastoresWorkflowID(siteName string) string { return "cj-datastores-" + siteName }

// cjStatOptions: statfs is instant; a site that does not answer quickly
// leaves the stored figures as they are.
var cjStatOptions = workflow.ActivityOptions{
	ScheduleToStartTimeout: 10 * time.Second,
	StartToCloseTimeout:    10 * time.Second,
	RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
}

// CJDatastoresWorkflow refreshes a site's datastores (its storage pools)
// from the site.
func CJDatastoresWorkflow(ctx workflow.Context, siteName string) error {
	var st *site.Activities
	siteCtx := workflow.WithTaskQueue(workflow.WithActivityOptions(ctx, cjStatOptions), SiteTaskQueue(siteName, vocab.DefaultQueue))
	var pools []site.CJPool
	if err := workflow.ExecuteActivity(siteCtx, st.CJStatPools).Get(ctx, &pools); err != nil {
		return err
	}
	hubCtx := workflow.WithActivityOptions(ctx, cjHubOptions)
	return workflow.ExecuteActivity(hubCtx, actCJStoreDatastores, CJDatastores{Site: siteName, Pools: pools}).Get(ctx, nil)
}
