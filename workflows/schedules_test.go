package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// TestScheduleWorkflowWaitsForItsJobs: a firing starts its jobs under its
// own workflow ID as key, and lasts until they end (hours, skipped over by
// the test environment's clock), which is what makes overlap policy skip
// hold back the next firing.
func TestScheduleWorkflowWaitsForItsJobs(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub := &hubact.Activities{}
	env.RegisterActivity(hub)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "schedule-7-fire-2026-11-23T02:30:00Z"})
	env.OnActivity(hub.FireSchedule, mock.Anything, workflows.Fire{ID: 7, Key: "schedule-7-fire-2026-11-23T02:30:00Z"}).
		Return(&workflows.FireResult{Jobs: []int64{11, 12}}, nil).Once()
	env.OnActivity(hub.WaitJobs, mock.Anything, []int64{11, 12}).After(3 * time.Hour).Return(nil).Once()

	start := env.Now()
	env.ExecuteWorkflow(workflows.ScheduleWorkflow, workflows.Fire{ID: 7})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.FireResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, []int64{11, 12}, res.Jobs)
	require.GreaterOrEqual(t, env.Now().Sub(start), 3*time.Hour, "the firing lasted as long as its jobs")
	env.AssertExpectations(t)
}

// TestScheduleWorkflowWithNothingToStart ends at once when the schedule
// is gone (or has no workflows): nothing to wait for.
func TestScheduleWorkflowWithNothingToStart(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub := &hubact.Activities{}
	env.RegisterActivity(hub)
	env.OnActivity(hub.FireSchedule, mock.Anything, mock.Anything).Return(&workflows.FireResult{}, nil).Once()
	env.ExecuteWorkflow(workflows.ScheduleWorkflow, workflows.Fire{ID: 3})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	env.AssertNotCalled(t, "WaitJobs", mock.Anything, mock.Anything)
}

// TestFiringsPassTheirScheduledTime: a schedule's and a policy's firing
// pass the time Temporal's scheduler scheduled them for (its
// TemporalScheduledStartTime search attribute, from the start event, so
// replays read the same) to the activity that starts their jobs, which
// skips a firing daylight saving made (a local time repeated, or one the
// cron does not name: a reviewer's finding, each ran the jobs again).
// A workflow started otherwise passes no time.
func TestFiringsPassTheirScheduledTime(t *testing.T) {
	t.Parallel()
	nominal := time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC)
	for _, wf := range []string{workflows.ScheduleWorkflowName, workflows.PolicyWorkflowName} {
		for _, scheduled := range []bool{true, false} {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			hub := &hubact.Activities{}
			env.RegisterActivity(hub)
			if scheduled {
				require.NoError(t, env.SetSearchAttributesOnStart(map[string]any{"TemporalScheduledStartTime": nominal}))
			}
			var got workflows.Fire
			fire := func(_ context.Context, in workflows.Fire) (*workflows.FireResult, error) {
				got = in
				return &workflows.FireResult{Skipped: "daylight saving"}, nil
			}
			if wf == workflows.ScheduleWorkflowName {
				env.OnActivity(hub.FireSchedule, mock.Anything, mock.Anything).Return(fire).Once()
				env.ExecuteWorkflow(workflows.ScheduleWorkflow, workflows.Fire{ID: 5})
			} else {
				env.OnActivity(hub.PolicyPlan, mock.Anything, int64(5)).Return(&workflows.PolicyPlan{Found: true, Site: "west"}, nil)
				env.OnActivity(hub.FirePolicy, mock.Anything, mock.Anything).Return(fire).Once()
				env.ExecuteWorkflow(workflows.PolicyWorkflow, workflows.Fire{ID: 5})
			}
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			require.EqualValues(t, 5, got.ID)
			if scheduled {
				require.True(t, nominal.Equal(got.At), "%s: %v", wf, got.At)
			} else {
				require.True(t, got.At.IsZero(), "%s: %v", wf, got.At)
			}
			env.AssertExpectations(t)
		}
	}
}

// TestPolicyWorkflowFiresOnlyAboveItsTrigger: a policy with triggers
// measures its site's pools first and starts no job unless one is above
// its upper threshold.
func TestPolicyWorkflowFiresOnlyAboveItsTrigger(t *testing.T) {
	t.Parallel()
	for _, fired := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		hub, sa := &hubact.Activities{}, &site.Activities{}
		env.RegisterActivity(hub)
		env.RegisterActivity(sa)
		triggers := []site.PolicyTrigger{{Pool: "system", Lower: 60, Upper: 80}}
		env.OnActivity(hub.PolicyPlan, mock.Anything, int64(4)).Return(&workflows.PolicyPlan{Found: true, Site: "west", Triggers: triggers}, nil)
		env.OnActivity(sa.PolicyTriggered, mock.Anything, triggers).Return(
			func(ctx context.Context, _ []site.PolicyTrigger) (*site.PolicyFiring, error) {
				require.Equal(t, workflows.SiteTaskQueue("west", vocab.DefaultQueue), activity.GetInfo(ctx).TaskQueue)
				return &site.PolicyFiring{Fired: fired, Why: "measured"}, nil
			})
		if fired {
			env.OnActivity(hub.FirePolicy, mock.Anything, mock.Anything).Return(&workflows.FireResult{Jobs: []int64{9}}, nil).Once()
			env.OnActivity(hub.WaitJobs, mock.Anything, []int64{9}).After(time.Hour).Return(nil).Once()
		}
		env.ExecuteWorkflow(workflows.PolicyWorkflow, workflows.Fire{ID: 4})
		require.True(t, env.IsWorkflowCompleted())
		require.NoError(t, env.GetWorkflowError())
		var res workflows.FireResult
		require.NoError(t, env.GetWorkflowResult(&res))
		if fired {
			require.Equal(t, []int64{9}, res.Jobs)
		} else {
			require.Empty(t, res.Jobs)
			require.Equal(t, "measured", res.Skipped)
		}
		env.AssertExpectations(t)
	}
}

// TestSnapshotWorkflowAtEachSite: a snapshot firing names the snapshot
// after its time at every site of the space; one site failing does not
// undo the others.
func TestSnapshotWorkflowAtEachSite(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub, sa := &hubact.Activities{}, &site.Activities{}
	env.RegisterActivity(hub)
	env.RegisterActivity(sa)
	in := site.SpaceSnapshotInput{Space: "lab", Folder: "/spaces/lab", KeepFor: 7 * 24 * time.Hour}
	env.OnActivity(hub.SnapshotPlan, mock.Anything, int64(2)).Return(&workflows.SnapshotPlan{Found: true,
		Sites: []workflows.SnapshotAtSite{{Site: "a", Input: in}, {Site: "b", Input: in}}}, nil)
	var at time.Time
	env.OnActivity(sa.TakeSpaceSnapshot, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, got site.SpaceSnapshotInput) (*site.SpaceSnapshotResult, error) {
			at = got.At
			if activity.GetInfo(ctx).TaskQueue == workflows.SiteTaskQueue("b", vocab.DefaultQueue) {
				return nil, temporal.NewNonRetryableApplicationError("disk gone", vocab.ErrBadPath, nil)
			}
			return &site.SpaceSnapshotResult{Taken: site.ScheduledSnapshotName(got.At)}, nil
		})
	env.ExecuteWorkflow(workflows.SnapshotWorkflow, workflows.Fire{ID: 2})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.SnapshotResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, site.ScheduledSnapshotName(at), res.Sites["a"].Taken)
	require.Contains(t, res.Failed["b"], "disk gone")
}
