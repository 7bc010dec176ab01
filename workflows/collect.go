package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// Remote copies nothing refers to are collected by one workflow with a
// fixed ID, started by a daily schedule or the collect_remote_copies
// action: Temporal runs at most one execution per ID, which is the "one
// collector at a time" that site.Collect relies on.
const (
	CollectWorkflowName = "CollectWorkflow"
	CollectWorkflowID   = "hub-collect"
	CollectScheduleID   = "hub-collect"
	// CollectEvery is how often targets are collected: unreferenced
	// content spends site.DefaultCollectGrace in the trash anyway.
	CollectEvery = 24 * time.Hour
)

// collectOptions: a collection lists a whole target, so it may run for
// hours; it heartbeats while it does, and an offline site is waited for.
var collectOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 24 * time.Hour,
	HeartbeatTimeout:    2 * time.Minute,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
}

// CollectSummary is what a collection did, per target in plan order.
type CollectSummary struct {
	Targets []TargetCollected
}

// TargetCollected is one target's collection: its counts, or the error.
type TargetCollected struct {
	Name   string
	Result site.CollectResult
	Error  string
}

// CollectWorkflow collects every target on a site where it is available,
// one target after the other.
func CollectWorkflow(ctx workflow.Context) (CollectSummary, error) {
	var sum CollectSummary
	var plan []CollectTarget
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, hubOptions), actCollectPlan).Get(ctx, &plan); err != nil {
		return sum, err
	}
	var s *site.Activities
	collect := s.CollectTarget
	if workflow.GetVersion(ctx, "collect-both-ref-layouts", workflow.DefaultVersion, 1) == 1 {
		collect = s.CollectTargetBothLayouts // never an older site's collector
	}
	for _, t := range plan {
		opts := collectOptions
		opts.TaskQueue = SiteTaskQueue(t.Site, vocab.DefaultQueue)
		done := TargetCollected{Name: t.Target.Name}
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), collect,
			site.CollectInput{Target: t.Target}).Get(ctx, &done.Result)
		if err != nil {
			done.Error = fmt.Sprintf("at site %s: %v", t.Site, err)
		}
		sum.Targets = append(sum.Targets, done)
	}
	return sum, nil
}
