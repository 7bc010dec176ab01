package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// AnalyticsWorkflowName is the registered name of AnalyticsWorkflow.
const AnalyticsWorkflowName = "AnalyticsWorkflow"

// actStoreAnalytics is the hub activity that keeps a complete answer for
// reuse (cache_ttl).
const actStoreAnalytics = "StoreAnalytics"

// AnalyticsWorkflowID is the workflow ID of the analytics of a path of a
// site: requests for the same folder while one runs join it rather than
// walk the tree twice.
func AnalyticsWorkflowID(siteName, p string) string {
	sum := sha256.Sum256([]byte(p))
	return fmt.Sprintf("analytics-%s-%s", siteName, hex.EncodeToString(sum[:8]))
}

// AnalyticsInput asks a site what fills one of its folders.
type AnalyticsInput struct {
	Site, Queue string
	Path        string
	// Timeout bounds the whole answer (custom_timeout or the
	// configuration's analytics_timeout): the site walks for a little less
	// and answers with what it counted so far.
	Timeout time.Duration
}

// AnalyticsResult is the site's answer, or why there is none or only part
// of one.
type AnalyticsResult struct {
	Answer *site.AnalyticsOutput
	// TimedOut: no worker of the site answered within Timeout (Answer is
	// nil). A walk stopped at its budget answers, with Answer.Complete false.
	TimedOut bool
}

// StoreAnalyticsInput is a complete answer for the hub to keep.
type StoreAnalyticsInput struct {
	Site   string
	Answer *site.AnalyticsOutput
}

// analyticsBudget is what the site may spend walking out of the timeout:
// the rest carries the answer back (a tenth, at least a second, at most
// ten).
func analyticsBudget(timeout time.Duration) time.Duration {
	margin := min(max(timeout/10, time.Second), 10*time.Second)
	return max(timeout-margin, timeout/2)
}

// analyticsHeartbeat: a walk heartbeats as it goes; a worker dying mid-walk
// is noticed this soon and the walk is retried on another node.
const analyticsHeartbeat = 20 * time.Second

// AnalyticsWorkflow runs the walk on the site's queue and keeps a complete
// answer in the hub for cache_ttl. The file list never leaves the site:
// only the counts do.
func AnalyticsWorkflow(ctx workflow.Context, in AnalyticsInput) (*AnalyticsResult, error) {
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: SiteTaskQueue(in.Site, in.Queue),
		// Only useful now: a site without a worker in time is an answer
		// ("timed out"), not a walk that starts later for nobody.
		ScheduleToCloseTimeout: in.Timeout,
		HeartbeatTimeout:       analyticsHeartbeat,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	var s *site.Activities
	var out site.AnalyticsOutput
	err := workflow.ExecuteActivity(sctx, s.Analytics, site.AnalyticsInput{Path: in.Path, Budget: analyticsBudget(in.Timeout)}).Get(ctx, &out)
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return &AnalyticsResult{TimedOut: true}, nil
	}
	if err != nil {
		return nil, err
	}
	if out.Complete {
		hctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           HubTaskQueue,
			StartToCloseTimeout: 30 * time.Second,
			// The answer is useful even if it cannot be kept: a few tries,
			// then the caller has it anyway.
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		if err := workflow.ExecuteActivity(hctx, actStoreAnalytics, StoreAnalyticsInput{Site: in.Site, Answer: &out}).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("analytics answer not kept", "error", err)
		}
	}
	return &AnalyticsResult{Answer: &out}, nil
}
