package workflows_test

import (
	"context"
	"sync"
	"testing"

	"github.com/thehub/hub/workflows"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// TestBucketDeleteWorkflowKeepsBucketWhenASiteFails: one site cannot drop
// the settings, so the record stays and becomes editable again.
func TestBucketDeleteWorkflowKeepsBucketWhenASiteFails(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub, sa := &hubact.Activities{}, &site.Activities{}
	env.RegisterActivity(hub)
	env.RegisterActivity(sa)
	env.OnActivity(hub.BucketSites, mock.Anything, int64(7)).Return([]string{"a", "b"}, nil)
	env.OnActivity(sa.RemoveBucketConfig, mock.Anything, site.BucketConfigInput{Bucket: "cold"}).Return(
		func(ctx context.Context, _ site.BucketConfigInput) (site.BucketConfigResult, error) {
			if activity.GetInfo(ctx).TaskQueue == workflows.SiteTaskQueue("b", vocab.DefaultQueue) {
				return site.BucketConfigResult{}, temporal.NewNonRetryableApplicationError("read-only filesystem", "io", nil)
			}
			return site.BucketConfigResult{Removed: true}, nil
		})
	env.OnActivity(hub.ClearBucketSoftDeleting, mock.Anything, int64(7)).Return(nil).Once()
	env.ExecuteWorkflow(workflows.BucketDeleteWorkflow, workflows.BucketDeleteInput{BucketID: 7, Name: "cold"})
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "read-only filesystem")
	env.AssertExpectations(t)
	env.AssertNotCalled(t, "DeleteBucketRecord", mock.Anything, mock.Anything)
	require.Equal(t, "bucket-delete-7", workflows.BucketDeleteWorkflowID(7))
}

func TestBucketDeleteWorkflowDeletesTheRecordLast(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub, sa := &hubact.Activities{}, &site.Activities{}
	env.RegisterActivity(hub)
	env.RegisterActivity(sa)
	removed := 0
	env.OnActivity(hub.BucketSites, mock.Anything, int64(7)).Return([]string{"a", "b"}, nil)
	env.OnActivity(sa.RemoveBucketConfig, mock.Anything, mock.Anything).Return(
		func(context.Context, site.BucketConfigInput) (site.BucketConfigResult, error) {
			removed++
			return site.BucketConfigResult{Removed: true}, nil
		})
	env.OnActivity(hub.DeleteBucketRecord, mock.Anything, int64(7)).Return(func(context.Context, int64) error {
		require.Equal(t, 2, removed, "every site first")
		return nil
	}).Once()
	env.ExecuteWorkflow(workflows.BucketDeleteWorkflow, workflows.BucketDeleteInput{BucketID: 7, Name: "cold"})
	require.NoError(t, env.GetWorkflowError())
	var res workflows.BucketDeleteResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, []string{"a", "b"}, res.Sites)
}

// TestSpaceWorkflowRunsSignalledOps: ops run in the order signalled, also
// those arriving while others run; creations record their state, a kept
// directory is reported.
func TestSpaceWorkflowRunsSignalledOps(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub, sa := &hubact.Activities{}, &site.Activities{}
	env.RegisterActivity(hub)
	env.RegisterActivity(sa)
	env.OnActivity(sa.CreateSpaceDir, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in site.SpaceDirInput) (site.SpaceDirResult, error) {
			if activity.GetInfo(ctx).TaskQueue == workflows.SiteTaskQueue("down", vocab.DefaultQueue) {
				return site.SpaceDirResult{}, temporal.NewNonRetryableApplicationError("a file is in the way", "SpaceDir", nil)
			}
			return site.SpaceDirResult{Outcome: site.SpaceDirCreated, Path: in.Mountpoint}, nil
		})
	env.OnActivity(sa.RemoveSpaceDir, mock.Anything, mock.Anything).Return(site.SpaceDirResult{Outcome: site.SpaceDirKept, Message: "not empty"}, nil)
	// Sites are created concurrently: collect their states by site.
	var mu sync.Mutex
	states := map[string]workflows.SpaceSiteState{}
	env.OnActivity(hub.RecordSpaceSite, mock.Anything, mock.Anything).Return(
		func(_ context.Context, st workflows.SpaceSiteState) error {
			mu.Lock()
			defer mu.Unlock()
			states[st.Site] = st
			return nil
		})

	op := func(site, action string) workflows.SpaceOp {
		return workflows.SpaceOp{Site: site, Queue: vocab.DefaultQueue, Action: action, Mountpoint: "/spaces/p"}
	}
	// Both signals land before the first ops finish (a later one would find
	// the workflow done; the API signals with start, so it would start a new
	// run, which this test environment cannot show).
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SpaceOpsSignal, workflows.SpaceOps{Ops: []workflows.SpaceOp{op("up", workflows.SpaceCreate), op("down", workflows.SpaceCreate)}})
		env.SignalWorkflow(workflows.SpaceOpsSignal, workflows.SpaceOps{Ops: []workflows.SpaceOp{op("up", workflows.SpaceRemove)}})
	}, 0)
	env.ExecuteWorkflow(workflows.SpaceWorkflow, workflows.SpaceInput{SpaceID: 3})
	require.NoError(t, env.GetWorkflowError())
	var res workflows.SpaceResult
	require.NoError(t, env.GetWorkflowResult(&res))
	var got []string
	for _, o := range res.Outcomes {
		got = append(got, o.Op.Site+":"+o.Op.Action+":"+o.Outcome)
	}
	require.Equal(t, []string{"up:create:created", "down:create:error", "up:remove:kept"}, got)
	require.Len(t, states, 2)
	require.Equal(t, workflows.SpaceSiteState{SpaceID: 3, Site: "up", State: vocab.SpaceSiteReady}, states["up"])
	require.Equal(t, vocab.SpaceSiteError, states["down"].State)
	require.Contains(t, states["down"].Message, "a file is in the way")
	require.Equal(t, "space-3", workflows.SpaceWorkflowID(3))
}
