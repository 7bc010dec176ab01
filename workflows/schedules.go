package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// Recurring things are Temporal Schedules, one per record, kept in step
// with the records by activities/changes (see docs/schedules-policies.md):
// "schedule-<id>" fires ScheduleWorkflow, "policy-<id>" fires
// PolicyWorkflow.
const (
	ScheduleWorkflowName = "ScheduleWorkflow"
	PolicyWorkflowName   = "PolicyWorkflow"
)

// ScheduleTemporalID is the ID of schedule id's Temporal Schedule; its
// firings' workflow IDs start with it too.
func ScheduleTemporalID(id int64) string { return fmt.Sprintf("schedule-%d", id) }

// PolicyTemporalID is the ID of policy id's Temporal Schedule.
func PolicyTemporalID(id int64) string { return fmt.Sprintf("policy-%d", id) }

// Fire asks for one firing of a schedule or a policy. Key names the
// firing (its workflow ID): the jobs a firing starts carry it, so an
// activity retried after a crash finds them instead of starting more.
type Fire struct {
	ID  int64
	Key string `json:",omitempty"`
	// Now: a run an operator asked for (POST …/run/), which fires
	// whatever the record's state; a Temporal Schedule's firing fires
	// only while its record and the hub leave it unpaused.
	Now bool `json:",omitempty"`
	// At is the time a Temporal Schedule's firing was scheduled for
	// (scheduledAt); zero for a run started otherwise. The firing's
	// activity skips a firing that daylight saving made (a local time
	// repeated, or one the cron does not name).
	At time.Time `json:",omitzero"`
}

// scheduledAt is the nominal time of the Temporal Schedule's firing that
// started this workflow: its TemporalScheduledStartTime search attribute,
// which Temporal's scheduler sets on the workflows it starts (part of the
// start event, so replays read the same); zero when there is none.
func scheduledAt(ctx workflow.Context) time.Time {
	var at time.Time
	p := workflow.GetInfo(ctx).SearchAttributes.GetIndexedFields()["TemporalScheduledStartTime"]
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &at) != nil {
		return time.Time{}
	}
	return at
}

// FireResult is what a firing started.
type FireResult struct {
	Jobs []int64
	// Skipped says why a firing started nothing (a policy's trigger not
	// above its upper threshold, a record paused since, a time a
	// daylight-saving change repeated or the cron does not name).
	Skipped string `json:",omitempty"`
}

// firingWait bounds how long a firing waits for its jobs: a firing holds
// back the schedule's next one (overlap policy skip) until its jobs end.
const firingWait = 30 * 24 * time.Hour

func hubCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute, MaximumAttempts: 20},
	})
}

// waitJobs waits until every job has ended (or was deleted).
func waitJobs(ctx workflow.Context, jobs []int64) error {
	if len(jobs) == 0 {
		return nil
	}
	wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: firingWait,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: time.Minute},
	})
	return workflow.ExecuteActivity(wctx, actWaitJobs, jobs).Get(ctx, nil)
}

// ScheduleWorkflow is one firing of a schedule: it starts one job per
// schedule workflow over the schedule's managed paths, then waits for them
// to end, so that the schedule's next firing, while they run, is skipped.
func ScheduleWorkflow(ctx workflow.Context, in Fire) (*FireResult, error) {
	in.Key = workflow.GetInfo(ctx).WorkflowExecution.ID
	in.At = scheduledAt(ctx)
	var res FireResult
	if err := workflow.ExecuteActivity(hubCtx(ctx), actFireSchedule, in).Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, waitJobs(ctx, res.Jobs)
}

// PolicyPlan is what a policy's firing needs to know first: its site, and
// its triggers (none: it always runs).
type PolicyPlan struct {
	Found    bool
	Site     string
	Triggers []site.PolicyTrigger
}

// PolicyWorkflow is one firing of a policy: with triggers, it first
// measures the site's pools and ends without a job unless one is fuller
// than its upper threshold; then it starts the policy's job (its scan
// runs on the site) and waits for it to end.
func PolicyWorkflow(ctx workflow.Context, in Fire) (*FireResult, error) {
	in.Key = workflow.GetInfo(ctx).WorkflowExecution.ID
	in.At = scheduledAt(ctx)
	hub := hubCtx(ctx)
	var plan PolicyPlan
	if err := workflow.ExecuteActivity(hub, actPolicyPlan, in.ID).Get(ctx, &plan); err != nil {
		return nil, err
	}
	if !plan.Found {
		return &FireResult{Skipped: "the policy no longer exists"}, nil
	}
	if len(plan.Triggers) > 0 {
		var s *site.Activities
		sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: SiteTaskQueue(plan.Site, vocab.DefaultQueue), StartToCloseTimeout: 5 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5, MaximumInterval: time.Minute,
				NonRetryableErrorTypes: []string{vocab.ErrBadInput}},
		})
		var fired site.PolicyFiring
		if err := workflow.ExecuteActivity(sctx, s.PolicyTriggered, plan.Triggers).Get(ctx, &fired); err != nil {
			return nil, err
		}
		if !fired.Fired {
			return &FireResult{Skipped: fired.Why}, nil
		}
	}
	var res FireResult
	if err := workflow.ExecuteActivity(hub, actFirePolicy, in).Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, waitJobs(ctx, res.Jobs)
}

// SnapshotWorkflowName names the firing of a space's snapshot schedule
// ("snapshot-<space id>").
const SnapshotWorkflowName = "SnapshotWorkflow"

// SnapshotTemporalID is the ID of space id's snapshot schedule.
func SnapshotTemporalID(spaceID int64) string { return fmt.Sprintf("snapshot-%d", spaceID) }

// SnapshotPlan is what a snapshot firing does at each of the space's
// sites (Input.At is filled by the workflow).
type SnapshotPlan struct {
	Found bool
	Sites []SnapshotAtSite
}

// SnapshotAtSite is one site's part of a snapshot firing.
type SnapshotAtSite struct {
	Site  string
	Input site.SpaceSnapshotInput
}

// SnapshotResult is what each site did.
type SnapshotResult struct {
	Sites map[string]*site.SpaceSnapshotResult
	// Failed maps a site to why its snapshot failed; the other sites'
	// snapshots stand.
	Failed map[string]string `json:",omitempty"`
}

// SnapshotWorkflow is one firing of a space's snapshot schedule: at each
// of the space's sites, in parallel, it takes a snapshot named after the
// firing's time and removes the scheduled snapshots older than the
// schedule's retention.
func SnapshotWorkflow(ctx workflow.Context, in Fire) (*SnapshotResult, error) {
	var plan SnapshotPlan
	if err := workflow.ExecuteActivity(hubCtx(ctx), actSnapshotPlan, in.ID).Get(ctx, &plan); err != nil {
		return nil, err
	}
	at := workflow.Now(ctx).UTC().Truncate(time.Second)
	var s *site.Activities
	futures := make([]workflow.Future, len(plan.Sites))
	for i, p := range plan.Sites {
		p.Input.At = at
		sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: SiteTaskQueue(p.Site, vocab.DefaultQueue), StartToCloseTimeout: 6 * time.Hour, HeartbeatTimeout: 2 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5, MaximumInterval: time.Minute,
				NonRetryableErrorTypes: []string{vocab.ErrBadInput, vocab.ErrBadPath}},
		})
		futures[i] = workflow.ExecuteActivity(sctx, s.TakeSpaceSnapshot, p.Input)
	}
	res := &SnapshotResult{Sites: map[string]*site.SpaceSnapshotResult{}, Failed: map[string]string{}}
	for i, f := range futures {
		var r site.SpaceSnapshotResult
		if err := f.Get(ctx, &r); err != nil {
			res.Failed[plan.Sites[i].Site] = err.Error()
			continue
		}
		res.Sites[plan.Sites[i].Site] = &r
	}
	if len(res.Failed) > 0 && len(res.Sites) == 0 {
		return res, fmt.Errorf("no site took the snapshot: %v", res.Failed)
	}
	return res, nil
}
