package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The outbox reconciler delivers what committed record changes still owe
// Temporal (activities/changes): the intents a request could not deliver
// because Temporal was away or the hub died, and signals no workflow
// claimed. A schedule runs it every OutboxEvery; one ID keeps it single.
const (
	OutboxWorkflowName = "OutboxWorkflow"
	OutboxWorkflowID   = "hub-outbox"
	OutboxScheduleID   = "hub-outbox"
	// OutboxEvery bounds how long a change waits after Temporal comes back
	// or the hub restarts; requests deliver their own changes at once.
	OutboxEvery = time.Minute
)

// OutboxWorkflow delivers every due intent and returns how many.
func OutboxWorkflow(ctx workflow.Context) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    2 * time.Minute, // a pass heartbeats after each page of intents
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var n int
	err := workflow.ExecuteActivity(ctx, actDeliverChanges).Get(ctx, &n)
	return n, err
}
