package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// NodeHeartbeatSignal carries a Heartbeat from a site worker node.
const NodeHeartbeatSignal = "node-heartbeat"

// NodeWorkflowName is the registered name of NodeWorkflow.
const NodeWorkflowName = "NodeWorkflow"

// NodeWorkflowID is one workflow per node and queue, so operators see every
// live worker in the Temporal UI.
func NodeWorkflowID(site, queue, node string) string {
	return fmt.Sprintf("node-%s-%s-%s", site, queue, node)
}

// nodeIdle ends a run after a node has been silent this long; its next
// heartbeat starts a new run.
const nodeIdle = 24 * time.Hour

// maxBeatsPerRun keeps each run's history small (about 7 events a beat).
const maxBeatsPerRun = 500

// recordOptions: a heartbeat is only worth recording while fresh, so retry
// briefly and give up; the next beat will come.
var recordOptions = workflow.ActivityOptions{
	TaskQueue:           HubTaskQueue,
	StartToCloseTimeout: 10 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
}

// NodeWorkflow records the heartbeat it starts with and every heartbeat the
// node signals after, continuing as new every maxBeatsPerRun beats.
func NodeWorkflow(ctx workflow.Context, first Heartbeat) error {
	ctx = workflow.WithActivityOptions(ctx, recordOptions)
	ch := workflow.GetSignalChannel(ctx, NodeHeartbeatSignal)
	hb := first
	for beats := 0; ; beats++ {
		if err := workflow.ExecuteActivity(ctx, actRecordHeartbeat, hb).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("heartbeat not recorded", "node", hb.Node, "error", err)
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		idle := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &hb) })
		sel.AddFuture(workflow.NewTimer(timerCtx, nodeIdle), func(workflow.Future) { idle = true })
		sel.Select(ctx)
		cancelTimer()
		if idle {
			return nil
		}
		if beats+1 >= maxBeatsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// Only the newest beat matters: drain so no signal is lost
			// across continue-as-new; the next run records it first.
			for ch.ReceiveAsync(&hb) {
			}
			return workflow.NewContinueAsNewError(ctx, NodeWorkflowName, hb)
		}
	}
}
