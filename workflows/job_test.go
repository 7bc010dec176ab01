package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/thehub/hub/workflows"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// jobEnv is a workflows.JobWorkflow test environment with mocked activities: a plan
// of one rule with one step, and discovery returning batches of one path.
type jobEnv struct {
	env     *testsuite.TestWorkflowEnvironment
	mu      sync.Mutex
	states  []string
	steps   int
	outcome string
	// stepErr, when set, is the error RunStep returns for a batch.
	stepErr func(batch int) error
	ends    []workflows.TaskEnd
}

func newJobEnv(t *testing.T, batches int) *jobEnv {
	var s testsuite.WorkflowTestSuite
	je := &jobEnv{env: s.NewTestWorkflowEnvironment()}
	hub, sa := &hubact.Activities{}, &site.Activities{}
	je.env.RegisterActivity(hub)
	je.env.RegisterActivity(sa)
	je.env.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.JobWorkflowName})
	je.env.OnActivity(hub.LoadJobPlan, mock.Anything, mock.Anything).Return(&workflows.JobPlan{JobID: 1, Site: "s", Queue: "default", Run: 1,
		Discovery: "recursive", Rules: []site.RuleFilter{{Type: "all"}}, Chains: [][]workflows.StepPlan{{{Name: "premigrate"}}}}, nil)
	je.env.OnActivity(hub.SetJobState, mock.Anything, mock.Anything).Return(func(_ context.Context, c workflows.JobStateChange) error {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.states = append(je.states, c.State)
		return nil
	})
	out := &site.DiscoverOutput{Files: int64(batches)}
	for i := 0; i < batches; i++ {
		out.Batches = append(out.Batches, site.BatchMeta{Index: i, N: 1})
	}
	je.env.OnActivity(sa.Discover, mock.Anything, mock.Anything).Return(out, nil)
	je.env.OnActivity(hub.RecordDiscovery, mock.Anything, mock.Anything).Return(nil)
	je.env.OnActivity(hub.StartTask, mock.Anything, mock.Anything).Return(int64(1), nil)
	je.env.OnActivity(sa.RunStep, mock.Anything, mock.Anything).Return(func(_ context.Context, in site.StepInput) (*site.StepOutput, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.steps++
		if je.stepErr != nil {
			if err := je.stepErr(in.Batch); err != nil {
				return nil, err
			}
		}
		return &site.StepOutput{Outcomes: []site.Outcome{{Path: "/f", State: site.OutcomeSuccess}}}, nil
	})
	je.env.OnActivity(hub.FinishTask, mock.Anything, mock.Anything).Return(func(_ context.Context, end workflows.TaskEnd) (workflows.TaskCounts, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.ends = append(je.ends, end)
		return workflows.TaskCounts{Succeeded: 1}, nil
	})
	je.env.OnActivity(hub.FinishJob, mock.Anything, mock.Anything).Return(func(_ context.Context, e workflows.JobEnd) (workflows.JobOutcome, error) {
		je.outcome = e.State
		return workflows.JobOutcome{State: e.State}, nil
	})
	je.env.OnActivity(sa.CleanupJob, mock.Anything, mock.Anything).Return(nil)
	return je
}

func TestJobWorkflowRunsEveryBatch(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 12)
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Equal(t, 12, je.steps)
	require.Equal(t, vocab.JobSuccess, je.outcome)
	require.Equal(t, []string{vocab.JobStarted}, je.states)
}

func TestJobWorkflowContinuesAsNewWithACursor(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, workflows.JobBatchesPerRun+10)
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(je.env.GetWorkflowError(), &can), "got %v", je.env.GetWorkflowError())
	var next workflows.JobInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.Carry)
	// Batches already in flight at the threshold finish in this run.
	require.GreaterOrEqual(t, next.Carry.Next, workflows.JobBatchesPerRun)
	require.Less(t, next.Carry.Next, workflows.JobBatchesPerRun+workflows.JobParallelBatches)
	require.Equal(t, next.Carry.Next, next.Carry.Done, "the cursor carries on where this run stopped")
	require.Len(t, next.Carry.Queue, workflows.JobBatchesPerRun+10, "batch ids, not paths, ride along")
	require.Equal(t, next.Carry.Next, je.steps)
}

// TestJobWorkflowPauseResume: while paused nothing is dispatched; resume
// finishes the job. A continued run that was paused re-records PAUSED.
func TestJobWorkflowPauseResume(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 6)
	je.env.RegisterDelayedCallback(func() { je.env.SignalWorkflow(workflows.PauseSignal, nil) }, 0)
	stepsWhenResumed := -1
	je.env.RegisterDelayedCallback(func() {
		je.mu.Lock()
		stepsWhenResumed = je.steps
		je.mu.Unlock()
		je.env.SignalWorkflow(workflows.ResumeSignal, nil)
	}, time.Hour)
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Equal(t, 6, je.steps)
	require.Less(t, stepsWhenResumed, 6, "nothing more ran while paused")
	require.Contains(t, je.states, vocab.JobPaused)
	require.Equal(t, vocab.JobStarted, je.states[len(je.states)-1])

	carried := newJobEnv(t, 0)
	carried.env.RegisterDelayedCallback(func() { carried.env.SignalWorkflow(workflows.ResumeSignal, nil) }, time.Hour)
	carried.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1, Carry: &workflows.JobCarry{Paused: true, Prepared: true,
		Plan:  workflows.JobPlan{JobID: 1, Site: "s", Queue: "default", Chains: [][]workflows.StepPlan{{{Name: "premigrate"}}}},
		Queue: []vocab.BatchRef{{Index: 0, N: 1}}}})
	require.NoError(t, carried.env.GetWorkflowError())
	require.Equal(t, []string{vocab.JobPaused, vocab.JobStarted}, carried.states, "a continued run records its real state first")
	require.Equal(t, 1, carried.steps)
}

// TestJobWorkflowInvalidatesAStaleTask: a step not finished within
// task_invalidation_timeout of being handed to the site (Temporal's
// schedule-to-close timeout) ends its task in ERROR as invalid, and only
// its batch is aborted.
func TestJobWorkflowInvalidatesAStaleTask(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 3)
	je.stepErr = func(batch int) error {
		if batch == 1 {
			return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil)
		}
		return nil
	}
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	var invalid []workflows.TaskEnd
	for _, e := range je.ends {
		if e.State == vocab.TaskError {
			invalid = append(invalid, e)
		}
	}
	require.Len(t, invalid, 1, "%+v", je.ends)
	require.Contains(t, invalid[0].Error, "invalid: not finished within task_invalidation_timeout (24h0m0s)")
	require.Len(t, je.ends, 3)
	require.Equal(t, vocab.JobSuccess, je.outcome, "the other batches finished; the aborted one is left to resubmit")
}
