package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/thehub/hub/workflows"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
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
	// plan is what LoadJobPlan returns.
	plan       workflows.JobPlan
	discovered int
	// pathsPage and discover, when set, answer JobPathsPage and Discover.
	pathsPage   func(workflows.JobPathsRequest) workflows.JobPathsPage
	discover    func(site.DiscoverInput) *site.DiscoverOutput
	discoveries []site.DiscoverInput
	recorded    []workflows.DiscoveryDone
	// superseded is what FinishJob answers for Superseded; endRun is the
	// run it was told ends, cleanups counts CleanupJob's calls.
	superseded bool
	endRun     int
	cleanups   int
	// localDown fails every FinishTask run as a local activity, counted
	// in localFinishes.
	localDown     bool
	localFinishes int
	// statesLocal tells, for each of states, whether it was recorded by a
	// local activity.
	statesLocal []bool
	// onRecorded, when set, sees each discovery recorded.
	onRecorded func(workflows.DiscoveryDone)
	// stepInputs: every RunStep's input.
	stepInputs []site.StepInput
	// committed: every CommitSnapdiff's pending manifest; endSnapdiff,
	// the one FinishJob was told of.
	committed   []string
	endSnapdiff string
}

func newJobEnv(t *testing.T, batches int) *jobEnv {
	var s testsuite.WorkflowTestSuite
	je := &jobEnv{env: s.NewTestWorkflowEnvironment()}
	hub, sa := &hubact.Activities{}, &site.Activities{}
	je.env.RegisterActivity(hub)
	je.env.RegisterActivity(sa)
	je.env.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.JobWorkflowName})
	je.plan = workflows.JobPlan{JobID: 1, Site: "s", Queue: "default", Run: 1, State: vocab.JobPending,
		Discovery: "recursive", Rules: []site.RuleFilter{{Type: "all"}}, Chains: [][]workflows.StepPlan{{{Name: "premigrate"}}}}
	je.env.OnActivity(hub.LoadJobPlan, mock.Anything, mock.Anything).Return(func(context.Context, int64) (*workflows.JobPlan, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		p := je.plan
		return &p, nil
	})
	je.env.OnActivity(hub.SetJobState, mock.Anything, mock.Anything).Return(func(ctx context.Context, c workflows.JobStateChange) error {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.states = append(je.states, c.State)
		je.statesLocal = append(je.statesLocal, activity.GetInfo(ctx).IsLocalActivity)
		return nil
	})
	out := &site.DiscoverOutput{Files: int64(batches)}
	for i := 0; i < batches; i++ {
		out.Batches = append(out.Batches, site.BatchMeta{Index: i, N: 1})
	}
	je.env.OnActivity(sa.Discover, mock.Anything, mock.Anything).Return(func(_ context.Context, in site.DiscoverInput) (*site.DiscoverOutput, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.discovered++
		je.discoveries = append(je.discoveries, in)
		if je.discover != nil {
			return je.discover(in), nil
		}
		return out, nil
	})
	je.env.OnActivity(hub.JobPathsPage, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.JobPathsRequest) (workflows.JobPathsPage, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		if je.pathsPage != nil {
			return je.pathsPage(in), nil
		}
		return workflows.JobPathsPage{Paths: []string{"/data"}, Next: 1, Done: true, Site: "s"}, nil
	})
	je.env.OnActivity(hub.JobSite, mock.Anything, mock.Anything).Return(workflows.SiteRef{ID: 1, Name: "s"}, nil)
	je.env.OnActivity(hub.RecordDiscovery, mock.Anything, mock.Anything).Return(func(_ context.Context, d workflows.DiscoveryDone) error {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.recorded = append(je.recorded, d)
		if je.onRecorded != nil {
			je.onRecorded(d)
		}
		return nil
	})
	je.env.OnActivity(hub.StartTask, mock.Anything, mock.Anything).Return(int64(1), nil)
	je.env.OnActivity(sa.RunStep, mock.Anything, mock.Anything).Return(func(_ context.Context, in site.StepInput) (*site.StepOutput, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		je.steps++
		je.stepInputs = append(je.stepInputs, in)
		if je.stepErr != nil {
			if err := je.stepErr(in.Batch); err != nil {
				return nil, err
			}
		}
		return &site.StepOutput{Outcomes: []site.Outcome{{Path: "/f", State: site.OutcomeSuccess}}}, nil
	})
	je.env.OnActivity(hub.FinishTask, mock.Anything, mock.Anything).Return(func(ctx context.Context, end workflows.TaskEnd) (workflows.TaskCounts, error) {
		je.mu.Lock()
		defer je.mu.Unlock()
		if activity.GetInfo(ctx).IsLocalActivity {
			je.localFinishes++
			if je.localDown {
				return workflows.TaskCounts{}, errors.New("the database does not answer")
			}
		}
		je.ends = append(je.ends, end)
		return workflows.TaskCounts{Succeeded: 1}, nil
	})
	je.env.OnActivity(hub.FinishJob, mock.Anything, mock.Anything).Return(func(_ context.Context, e workflows.JobEnd) (workflows.JobOutcome, error) {
		je.outcome, je.endRun, je.endSnapdiff = e.State, e.Run, e.Snapdiff
		return workflows.JobOutcome{State: e.State, Superseded: je.superseded}, nil
	})
	je.env.OnActivity(sa.CommitSnapdiff, mock.Anything, mock.Anything).Return(func(_ context.Context, pending string) error {
		je.committed = append(je.committed, pending)
		return nil
	})
	je.env.OnActivity(sa.CleanupJob, mock.Anything, mock.Anything).Return(func(context.Context, int64) error {
		je.cleanups++
		return nil
	})
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

// TestJobWorkflowRunsALeftoverBatchInItsOwnRun: a batch left over from
// run 1 runs, in run 2, from run 1's batch file and with run 2's journal
// (site.journalFile), so its earlier failures are tried again.
func TestJobWorkflowRunsALeftoverBatchInItsOwnRun(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 1)
	je.plan.Run, je.plan.Leftover = 2, []vocab.BatchRef{{Run: 1, Index: 7, N: 1, Attempt: 2}}
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	var leftover []site.StepInput
	for _, in := range je.stepInputs {
		require.Equal(t, 2, in.InRun, "every step is part of run 2")
		if in.Run == 1 {
			leftover = append(leftover, in)
		}
	}
	require.Len(t, leftover, 1)
	require.Equal(t, 7, leftover[0].Batch)
	require.Equal(t, 2, leftover[0].BatchAttempt, "a leftover batch is read under the name its discovery gave it")
}

// TestJobWorkflowResubmitKeepsTheGlobs: a resubmit discovers its failed
// paths with the plan's include and exclude globs (the site's and the
// job's). Without them a policy's folder that failed in the first run was
// scanned unfiltered, and the files the site excludes were migrated or
// deleted (a reviewer's finding; TestPolicyResubmitKeepsTheSitesGlobs
// shows the site's side).
func TestJobWorkflowResubmitKeepsTheGlobs(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 1)
	je.plan.Run, je.plan.Resubmit, je.plan.Discovery = 2, true, "policy"
	je.plan.Policy = &site.PolicySelect{States: []string{"resident", "premigrated"}}
	je.plan.Include, je.plan.Exclude = []string{"**"}, []string{"**/*.keep"}
	failedOnce(je, "/space")
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.NotEmpty(t, je.discoveries)
	for _, in := range je.discoveries {
		require.Equal(t, []string{"/space"}, in.Paths)
		require.Equal(t, je.plan.Include, in.Include)
		require.Equal(t, je.plan.Exclude, in.Exclude)
		require.Equal(t, "", in.Mode, "a policy's paths are scanned by its policy")
	}
}

// failedOnce has the job's failed paths be paths, in one page.
func failedOnce(je *jobEnv, paths ...string) {
	je.env.OnActivity((&hubact.Activities{}).FailedPathsPage, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(context.Context, int64, string, int) ([]string, error) {
			page := paths
			paths = nil
			return page, nil
		})
}

// TestJobWorkflowResubmitWalksARecursiveJobsFolders: a recursive job's
// resubmit walks its failed paths, so a folder its first walk refused
// (not mounted then) is walked now; taken as an exact path it was one
// folder entry, which no file rule matched: the job ended SUCCESS
// without its files (a reviewer's suspicion, confirmed).
func TestJobWorkflowResubmitWalksARecursiveJobsFolders(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 1)
	je.plan.Run, je.plan.Resubmit, je.plan.Discovery = 2, true, "recursive"
	failedOnce(je, "/data/volume")
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Len(t, je.discoveries, 1)
	require.Equal(t, "recursive", je.discoveries[0].Mode)
	require.Equal(t, []string{"/data/volume"}, je.discoveries[0].Paths)
}

// TestJobWorkflowPassesTheGlobsToItsSteps: every step gets the plan's
// include and exclude globs (the site's and the job's), which discovery
// used: a delete handed a folder by a rule of type "all" removed it whole,
// with the files the globs keep out of the job (a reviewer's finding; the
// delete now checks the folder with them, TestADeleteNeverRemovesWhatTheGlobsKeepOut).
func TestJobWorkflowPassesTheGlobsToItsSteps(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 2)
	je.plan.Include, je.plan.Exclude = []string{"data/**"}, []string{"**/*.keep"}
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.NotEmpty(t, je.stepInputs)
	for _, in := range je.stepInputs {
		require.Equal(t, je.plan.Include, in.Include)
		require.Equal(t, je.plan.Exclude, in.Exclude)
	}
}

// TestJobWorkflowReadsTheBatchOfTheAttemptThatWroteIt: discovery is asked
// to name its batches by attempt, and each step reads the batch of the
// attempt whose output the workflow got (a stalled attempt's late write
// lands under another name).
func TestJobWorkflowReadsTheBatchOfTheAttemptThatWroteIt(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 1)
	je.discover = func(site.DiscoverInput) *site.DiscoverOutput {
		return &site.DiscoverOutput{Files: 2, Batches: []site.BatchMeta{{Index: 0, N: 1, Attempt: 3}, {Index: 1, N: 1}}}
	}
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.NotEmpty(t, je.discoveries)
	for _, in := range je.discoveries {
		require.True(t, in.AttemptNames)
	}
	attempts := map[int]int{}
	for _, in := range je.stepInputs {
		attempts[in.Batch] = in.BatchAttempt
	}
	require.Equal(t, map[int]int{0: 3, 1: 0}, attempts)
}

// TestJobWorkflowCommitsTheManifestOfTheRunItRetries: a resubmit of a
// snapdiff job commits, once it succeeds, the pending manifest of the run
// whose failures it retried (JobPlan.Snapdiff), and tells its end of it
// (kept for a further resubmit, should this run fail too).
func TestJobWorkflowCommitsTheManifestOfTheRunItRetries(t *testing.T) {
	t.Parallel()
	const pending = "m.manifest.pending-0123456789abcdef"
	je := newJobEnv(t, 1)
	je.plan.Run, je.plan.Resubmit, je.plan.Discovery, je.plan.Snapdiff = 2, true, "", pending
	failedOnce(je, "/f")
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Equal(t, vocab.JobSuccess, je.outcome)
	require.Equal(t, []string{pending}, je.committed)
	require.Equal(t, pending, je.endSnapdiff)
}

// TestJobWorkflowLeavesALaterRun: a run whose end FinishJob did not
// record, the job having moved on to another run, cleans up nothing of
// the job's (its batches may be the new run's leftovers).
func TestJobWorkflowLeavesALaterRun(t *testing.T) {
	t.Parallel()
	for _, superseded := range []bool{false, true} {
		je := newJobEnv(t, 2)
		je.superseded = superseded
		je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
		require.NoError(t, je.env.GetWorkflowError())
		require.Equal(t, je.plan.Run, je.endRun, "the end names its run")
		require.Equal(t, map[bool]int{false: 1, true: 0}[superseded], je.cleanups, "superseded: %v", superseded)
	}
}

// TestJobWorkflowWaitsForTheDatabaseThroughTheServer: a local call whose
// database keeps failing is retried in the worker for a while, then made
// through the server (where retries add nothing to history), and the job
// goes on.
func TestJobWorkflowWaitsForTheDatabaseThroughTheServer(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 2)
	je.localDown = true
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Equal(t, vocab.JobSuccess, je.outcome)
	require.Len(t, je.ends, 2, "each batch's end recorded once, through the server")
	require.Greater(t, je.localFinishes, 2*2, "retried in the worker first")
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
	// The first state is a local call; the pause states, which follow
	// signals, go through the server.
	require.Equal(t, append([]bool{true}, make([]bool, len(je.states)-1)...), je.statesLocal, "%v", je.states)

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

// TestJobWorkflowStartsOnce: a start delivered again (JobInput.Run set)
// once its run has begun or ended, or for a run that is no longer the
// job's, ends at once without touching the job. A start without a run
// (from before runs were checked) runs as before.
func TestJobWorkflowStartsOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		inRun     int
		planRun   int
		planState string
		runs      bool
	}{
		{"pending run", 2, 2, vocab.JobPending, true},
		{"run already started", 2, 2, vocab.JobStarted, false},
		{"run already paused", 2, 2, vocab.JobPaused, false},
		{"run already ended", 2, 2, vocab.JobSuccess, false},
		{"run replaced by a resubmit", 2, 3, vocab.JobPending, false},
		{"earlier run", 3, 2, vocab.JobFailure, false},
		{"start without a run", 0, 2, vocab.JobStarted, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			je := newJobEnv(t, 2)
			je.plan.Run, je.plan.State = tc.planRun, tc.planState
			je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1, Run: tc.inRun})
			require.True(t, je.env.IsWorkflowCompleted())
			require.NoError(t, je.env.GetWorkflowError())
			if tc.runs {
				require.Equal(t, 2, je.steps)
				require.Equal(t, vocab.JobSuccess, je.outcome)
				return
			}
			require.Empty(t, je.states, "the job's state is left alone")
			require.Zero(t, je.discovered, "nothing is discovered")
			require.Zero(t, je.steps, "no step runs")
			require.Empty(t, je.outcome, "the job's end is not recorded again")
		})
	}
}

// TestJobWorkflowCancelledBeforeItsStart: a start that finds its run
// CANCELLING (cancelled before the workflow ran) records CANCELLED at
// once, keeping the batches left over for a resubmit.
func TestJobWorkflowCancelledBeforeItsStart(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 2)
	je.plan.Run, je.plan.State = 2, vocab.JobCancelling
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1, Run: 2})
	require.True(t, je.env.IsWorkflowCompleted())
	require.Zero(t, je.discovered)
	require.Zero(t, je.steps)
	require.Equal(t, vocab.JobCancelled, je.outcome)
}

// TestJobWorkflowDiscoversPathsInPages: the job's paths reach discovery a
// page at a time from the hub, never whole; batches are numbered on across
// pages, each page's failures are recorded with the running total, and a
// run that has discovered enough pages continues as new with the cursor,
// not the paths.
func TestJobWorkflowDiscoversPathsInPages(t *testing.T) {
	t.Parallel()
	const pages = 3
	setup := func(je *jobEnv) {
		je.pathsPage = func(in workflows.JobPathsRequest) workflows.JobPathsPage {
			return workflows.JobPathsPage{Paths: []string{fmt.Sprintf("/p%d", in.Next)}, Next: in.Next + 1, Done: in.Next+1 >= pages, Site: "s"}
		}
		je.discover = func(in site.DiscoverInput) *site.DiscoverOutput {
			out := &site.DiscoverOutput{Files: 1, Batches: []site.BatchMeta{{Index: in.FirstBatch, N: 1}}}
			if in.Paths[0] == "/p1" {
				out.Failed = []site.Outcome{{Path: "/gone", State: site.OutcomeFailure, Message: "no such file"}}
			}
			return out
		}
	}
	je := newJobEnv(t, 0)
	setup(je)
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1, Run: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Len(t, je.discoveries, pages)
	for i, in := range je.discoveries {
		require.Equal(t, []string{fmt.Sprintf("/p%d", i)}, in.Paths)
		require.Equal(t, i, in.FirstBatch, "batches are numbered on across pages")
	}
	require.Len(t, je.recorded, pages)
	for i, d := range je.recorded {
		require.True(t, d.Paged)
		require.Equal(t, i+1, d.Page)
		require.Equal(t, i == pages-1, d.Final)
	}
	require.Equal(t, []int64{1, 3, 4}, []int64{je.recorded[0].Found, je.recorded[1].Found, je.recorded[2].Found})
	require.Equal(t, pages, je.steps)
	require.Equal(t, vocab.JobSuccess, je.outcome)

	// Many pages: the run continues as new between two pages.
	many := newJobEnv(t, 0)
	setup(many)
	many.pathsPage = func(in workflows.JobPathsRequest) workflows.JobPathsPage {
		return workflows.JobPathsPage{Paths: []string{fmt.Sprintf("/q%d", in.Next)}, Next: in.Next + 1, Site: "s"}
	}
	many.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1, Run: 1})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(many.env.GetWorkflowError(), &can), "got %v", many.env.GetWorkflowError())
	var next workflows.JobInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.False(t, next.Carry.Prepared)
	require.Equal(t, workflows.JobBatchesPerRun, next.Carry.PathsNext, "the cursor rides along")
	require.Empty(t, next.Carry.Plan.Paths, "paths never do")
	require.Len(t, next.Carry.Queue, workflows.JobBatchesPerRun)
	require.Zero(t, many.steps, "batches run once discovery is complete")
}

// TestJobWorkflowCancelBeforeContinueAsNew: a cancellation that arrives
// while a run is about to continue as new (here during its last discovery
// page) ends the job CANCELLED: the new run would not be cancelled, and
// the job would run on.
func TestJobWorkflowCancelBeforeContinueAsNew(t *testing.T) {
	t.Parallel()
	discovering := newJobEnv(t, 0)
	discovering.pathsPage = func(in workflows.JobPathsRequest) workflows.JobPathsPage {
		return workflows.JobPathsPage{Paths: []string{fmt.Sprintf("/q%d", in.Next)}, Next: in.Next + 1, Site: "s"}
	}
	discovering.discover = func(in site.DiscoverInput) *site.DiscoverOutput {
		return &site.DiscoverOutput{Files: 1, Batches: []site.BatchMeta{{Index: in.FirstBatch, N: 1}}}
	}
	discovering.onRecorded = func(d workflows.DiscoveryDone) {
		if d.Page == workflows.JobBatchesPerRun {
			discovering.env.CancelWorkflow() // while the run's last page is recorded
		}
	}
	discovering.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1, Run: 1})
	require.True(t, temporal.IsCanceledError(discovering.env.GetWorkflowError()), "got %v", discovering.env.GetWorkflowError())
	require.Equal(t, vocab.JobCancelled, discovering.outcome)

}

// TestJobWorkflowAppliesTheLastPauseOrResumeSent: a pause sent after a
// resume but reaching the workflow first (two hub processes, a retried
// request) was undone by the resume, so the job ran on although the last
// request was a pause. Each signal now carries its request's number, and
// one numbered before the last applied is stale.
func TestJobWorkflowAppliesTheLastPauseOrResumeSent(t *testing.T) {
	t.Parallel()
	je := newJobEnv(t, 6)
	je.env.RegisterDelayedCallback(func() { je.env.SignalWorkflow(workflows.PauseSignal, int64(1)) }, 0)
	steps := func() int {
		je.mu.Lock()
		defer je.mu.Unlock()
		return je.steps
	}
	atResume, atCheck := -1, -1
	je.env.RegisterDelayedCallback(func() {
		atResume = steps()
		// Sent in one order, delivered in the other: the pause (sent
		// last) reaches the workflow task first.
		je.env.SignalWorkflowSkippingWorkflowTask(workflows.PauseSignal, int64(3))
		je.env.SignalWorkflow(workflows.ResumeSignal, int64(2))
	}, time.Hour)
	je.env.RegisterDelayedCallback(func() {
		atCheck = steps()
		je.env.SignalWorkflow(workflows.ResumeSignal, int64(4))
	}, 2*time.Hour)
	je.env.ExecuteWorkflow(workflows.JobWorkflow, workflows.JobInput{JobID: 1})
	require.NoError(t, je.env.GetWorkflowError())
	require.Less(t, atResume, 6)
	require.Equal(t, atResume, atCheck, "still paused: the pause was sent last")
	require.Equal(t, 6, je.steps, "the last resume finishes it")
}
