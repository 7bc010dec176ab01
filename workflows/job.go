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

// Names of the job workflow, its signals and its query.
const (
	JobWorkflowName = "JobWorkflow"
	PauseSignal     = "pause"
	ResumeSignal    = "resume"
	ProgressQuery   = "progress"
)

// JobWorkflowID is the workflow id of job id: one workflow per job; a
// resubmitted job runs again under the same id.
func JobWorkflowID(id int64) string { return fmt.Sprintf("job-%d", id) }

// JobInput starts or continues a job. Carry is set only by
// continue-as-new.
type JobInput struct {
	JobID int64
	Carry *JobCarry
	// Run is the job's run this start is for (0: a start from before runs
	// were checked, which runs whatever the job's state). A start delivered
	// again once its run has begun or ended, or for a run the job no longer
	// has, ends at once without work.
	Run int
}

// JobCarry is the state a job carries into its next run: ids, cursors and
// counts, never path lists.
type JobCarry struct {
	Plan        JobPlan
	Queue       []vocab.BatchRef // batches to run, in order
	Next        int              // index in Queue of the next batch to dispatch
	Done        int              // batches finished
	Aborted     []vocab.BatchRef // batches whose task failed for good
	Paused      bool
	SignalSeq   int64  // the number of the last pause or resume applied (models.NextSignal; 0 before they had one)
	Snapdiff    string // pending manifest to commit on success
	FailedAfter string // resubmit: keyset cursor into the failed paths
	Pages       int    // discovery pages done, each its own task
	Prepared    bool   // discovery (or resubmit preparation) is complete
	PathsNext   int    // paged discovery: index of the job's next path (JobPathsRequest.Next)
	Found       int64  // paged discovery: entries and failed paths found so far
}

// JobProgress answers the progress query.
type JobProgress struct {
	JobID       int64
	State       string
	Batches     int
	BatchesDone int
	InFlight    int
	Paused      bool
	// FilesUnrecorded counts the paths of batches whose first step has
	// ended and whose outcomes are not recorded at the hub yet: the live
	// progress counts them between the step's last heartbeat and the
	// stored counters.
	FilesUnrecorded int64
}

// Tunables, each with the reason for its value.
const (
	// jobParallelBatches bounds the batches of one job in flight at once,
	// so one job cannot monopolise a site's pool.
	jobParallelBatches = 4
	// jobBatchesPerRun: continue-as-new after this many finished batches;
	// a batch costs about 20 history events per step, so a run stays far
	// below the 10,240-event limit whatever the job's size.
	jobBatchesPerRun = 40
	// failedPathsPage is how many failed paths a resubmit re-discovers
	// per site activity.
	failedPathsPage = 1000
	// pathsPageLimit and pathsPageBytes bound a page of the job's paths
	// handed to discovery: the page, and the outcomes of its paths that
	// cannot be found, stay far below Temporal's 2 MB payload limit, and a
	// run holds a few pages before history suggests continuing as new.
	pathsPageLimit = 1000
	pathsPageBytes = 256 << 10
)

// jobChange versions the commands of JobWorkflow (workflow.GetVersion),
// one check per run. Version jobV1:
//   - discovery reads the job's paths from the hub a page at a time
//     (JobPathsPage) and records each page as it goes, continuing as new
//     between pages when history grows: a job may name more paths than one
//     payload holds;
//   - before each batch the job's site is looked up by id (JobSite): task
//     queues follow a renamed site;
//   - steps are cancelled with WaitForCancellation: a cancelled job is
//     recorded CANCELLED only once every step in flight has stopped;
//   - a start delivered again (JobInput.Run) whose run is no longer
//     PENDING ends at once.
//
// Version jobV2: the job's bookkeeping at the hub (its states, discovery
// pages, tasks and end) runs as local activities, in the hub
// worker that runs the workflow, rather than through the hub's task
// queue: each call saves a round trip through the Temporal server (about
// 5 to 10 ms of a one-file job's 10 hops), and consecutive calls share
// one workflow task. The calls are the same idempotent hub activities,
// but a local activity's answer reaches history only with its workflow
// task: a worker that dies before runs the task's calls again, each
// seeing the writes of those after it, and with whatever signals came
// meanwhile. So the plan (LoadJobPlan), whose answer decides whether
// this start is its run's first, is still read through the server,
// recorded before the job writes anything. A local call whose database
// fails for two minutes goes through the server too (call).
//
// Version jobV3: the pause states go through the server too: they follow
// signals (setState).
const (
	jobChange = "job-paged-by-id-wait-cancel-once"
	jobV1     = 1
	jobV2     = 2
	jobV3     = 3
)

var (
	// hubOptions: database bookkeeping, retried until the database answers.
	hubOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
	}
	// hubLocalOptions: the same bookkeeping as a local activity (jobV2).
	// Its retries stay in the worker while they wait less than a workflow
	// task's timeout (10 s); a longer wait would be a timer in history,
	// one per retry. After two minutes the call goes through the server
	// instead (jobRun.call).
	hubLocalOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout:    hubOptions.StartToCloseTimeout,
		ScheduleToCloseTimeout: 2 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: 5 * time.Second},
	}
	// siteHeartbeat is how soon a dead site worker's activity is retried
	// elsewhere, and how soon a cancellation reaches a running step.
	siteHeartbeat = 20 * time.Second
)

// siteOptions runs activities on the job's site queue: each attempt may
// take at most timeout; after five failed attempts the activity fails.
func siteOptions(p *JobPlan, timeout time.Duration) workflow.ActivityOptions {
	if timeout <= 0 {
		timeout = 24 * time.Hour
	}
	return workflow.ActivityOptions{
		TaskQueue:           SiteTaskQueue(p.Site, p.Queue),
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    siteHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{vocab.ErrBadInput, vocab.ErrBadPath, vocab.ErrMissingBatch, vocab.ErrNotFound}},
	}
}

// stepOptions runs a task's step (RunStep, Receive). A task that has not
// finished task_invalidation_timeout after it was handed to the site
// (waiting for a worker, running and retrying together) is invalid: it
// ends in ERROR and its batch is aborted (and can be resubmitted), as is a
// batch whose step failed five times.
func stepOptions(p *JobPlan, timeout time.Duration) workflow.ActivityOptions {
	o := siteOptions(p, timeout)
	o.ScheduleToCloseTimeout = o.StartToCloseTimeout
	return o
}

// JobWorkflow runs a job: discover the paths into batches at the site,
// then run each batch through its rule's chain of steps, a few batches at
// a time, recording every path's outcome at the hub.
func JobWorkflow(ctx workflow.Context, in JobInput) error {
	j := &jobRun{jobID: in.JobID}
	if err := j.setup(ctx, in); err != nil {
		return j.fail(ctx, err)
	}
	if j.done {
		return nil
	}
	return j.run(ctx)
}

type jobRun struct {
	jobID     int64
	version   workflow.Version // of jobChange
	done      bool             // setup found nothing for this start to do
	c         JobCarry
	state     string // last state recorded at the hub
	inFlight  int
	sinceRun  int
	cancelled []vocab.BatchRef
	wake      int // bumped by signals and finished batches
	// unrecorded: paths of first steps ended, outcomes not yet recorded
	// (the progress query's FilesUnrecorded); no command depends on it.
	unrecorded int64
	hub        workflow.Context
	pause      workflow.ReceiveChannel
	resume     workflow.ReceiveChannel
	// signalOrder: stale pauses and resumes are dropped (apply).
	signalOrder bool
	// rerunState: a left-over batch's steps keep a journal of this run
	// (site.StepInput.InRun), and a resubmit commits the pending manifest
	// of the run it retries (JobPlan.Snapdiff).
	rerunState bool
}

func (j *jobRun) setup(ctx workflow.Context, in JobInput) error {
	j.version = workflow.GetVersion(ctx, jobChange, workflow.DefaultVersion, jobV3)
	j.signalOrder = workflow.GetVersion(ctx, "job-signal-order", workflow.DefaultVersion, 1) == 1
	j.rerunState = workflow.GetVersion(ctx, "job-rerun-state", workflow.DefaultVersion, 1) == 1
	j.hub = hubContext(ctx)
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (JobProgress, error) {
		return JobProgress{JobID: j.jobID, State: j.state, Batches: len(j.c.Queue), BatchesDone: j.c.Done,
			InFlight: j.inFlight, Paused: j.c.Paused, FilesUnrecorded: j.unrecorded}, nil
	}); err != nil {
		return err
	}
	j.pause = workflow.GetSignalChannel(ctx, PauseSignal)
	j.resume = workflow.GetSignalChannel(ctx, ResumeSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(j.pause, func(c workflow.ReceiveChannel, _ bool) { j.apply(c, ctx, true) })
			sel.AddReceive(j.resume, func(c workflow.ReceiveChannel, _ bool) { j.apply(c, ctx, false) })
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
			j.wake++
		}
	})
	if in.Carry != nil {
		// The previous run may have ended between recording PAUSING and
		// PAUSED (or before a resume was recorded): leave j.state unknown so
		// the first loop records the state this run is really in.
		j.c = *in.Carry
		return nil
	}
	var plan JobPlan
	if err := workflow.ExecuteActivity(j.hub, actLoadJobPlan, j.jobID).Get(ctx, &plan); err != nil {
		return err
	}
	j.c.Plan = plan
	j.c.Queue = append(j.c.Queue, plan.Leftover...)
	if j.rerunState {
		j.c.Snapdiff = plan.Snapdiff // a resubmit's, of the run whose failures it retries
	}
	if j.version >= jobV1 && in.Run != 0 {
		switch {
		case plan.Run != in.Run || (plan.State != vocab.JobPending && plan.State != vocab.JobCancelling):
			// Delivered again: this run began or ended already, or the job
			// has moved on to another run. Nothing to do, nothing to record.
			workflow.GetLogger(ctx).Warn("job start delivered again: ignored", "job", j.jobID, "run", in.Run,
				"current run", plan.Run, "state", plan.State)
			j.done = true
			return nil
		case plan.State == vocab.JobCancelling:
			// Cancelled before it ran: nothing to stop.
			j.done = true
			return j.recordCancelled()
		}
	}
	return j.setState(vocab.JobStarted, true)
}

// hubContext is the context of a job's bookkeeping at the hub, which
// cancellation does not reach, so a cancelled job still records why and
// where it stopped.
func hubContext(ctx workflow.Context) workflow.Context {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return workflow.WithLocalActivityOptions(workflow.WithActivityOptions(dctx, hubOptions), hubLocalOptions)
}

// call runs hub activity name with args on ctx (from hubContext) and
// decodes its result into out (nil: none). From jobV2 on it runs as a
// local activity, retried in the worker for a couple of minutes, then,
// if the database still fails, as an activity through the server, which
// retries without adding to history for as long as it takes; before
// jobV2, as an activity on the hub's task queue. A local activity gets
// args as they are, not a copy: hub activities must not change them.
func (j *jobRun) call(ctx workflow.Context, out any, name string, args ...any) error {
	if j.version < jobV2 {
		return workflow.ExecuteActivity(ctx, name, args...).Get(ctx, out)
	}
	err := workflow.ExecuteLocalActivity(ctx, name, args...).Get(ctx, out)
	var app *temporal.ApplicationError
	if err == nil || (errors.As(err, &app) && app.NonRetryable()) {
		return err
	}
	return workflow.ExecuteActivity(ctx, name, args...).Get(ctx, out)
}

// setState records the job's state at the hub. A run's first state
// (started) is a local call; from jobV3 on, the pause states go through
// the server: they follow signals, and a workflow task run again after
// its worker died may see other signals than its lost first run did,
// which would leave the state that run recorded standing.
func (j *jobRun) setState(state string, started bool) error {
	change := JobStateChange{JobID: j.jobID, Run: j.c.Plan.Run, State: state, Started: started}
	var err error
	if started || j.version < jobV3 {
		err = j.call(j.hub, nil, actSetJobState, change)
	} else {
		err = workflow.ExecuteActivity(j.hub, actSetJobState, change).Get(j.hub, nil)
	}
	if err != nil {
		return err
	}
	j.state = state
	return workflow.UpsertTypedSearchAttributes(j.hub, HubJobState.ValueSet(state))
}

func (j *jobRun) run(ctx workflow.Context) error {
	if !j.c.Prepared {
		if err := j.prepare(ctx); err != nil {
			return j.fail(ctx, err)
		}
	}
	// Version 1 takes the wake count before anything in the loop can block:
	// batches that finished while the state was being recorded wake the
	// loop again. Before it, a job paused in that instant could stay
	// PAUSING with nothing in flight.
	wakeFirst := workflow.GetVersion(ctx, "job-loop-wake-first", workflow.DefaultVersion, 1) == 1
	// Version 1 looks for a cancellation again once the pause state is
	// recorded: one that arrived meanwhile was otherwise lost when the run
	// continued as new (a new run is not cancelled).
	cancelAfterSync := workflow.GetVersion(ctx, "job-loop-cancel-after-sync", workflow.DefaultVersion, 1) == 1
	for {
		seen := j.wake
		if ctx.Err() != nil {
			return j.cancel(ctx)
		}
		if err := j.syncPauseState(); err != nil {
			return err
		}
		if cancelAfterSync && ctx.Err() != nil {
			return j.cancel(ctx)
		}
		if j.c.Next >= len(j.c.Queue) && j.inFlight == 0 {
			return j.finish(ctx)
		}
		rollover := j.sinceRun >= jobBatchesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		if rollover && j.inFlight == 0 {
			return j.continueAsNew(ctx)
		}
		if !j.c.Paused && !rollover && j.inFlight < jobParallelBatches && j.c.Next < len(j.c.Queue) {
			j.dispatch(ctx, j.c.Queue[j.c.Next])
			j.c.Next++
			continue
		}
		if !wakeFirst {
			seen = j.wake
		}
		_ = workflow.Await(ctx, func() bool { return j.wake != seen })
	}
}

// prepare fills the batch queue: discovery for a new job; for a resubmit,
// the failed paths of earlier runs re-discovered as new batches (the
// batches earlier runs never finished are already queued).
func (j *jobRun) prepare(ctx workflow.Context) error {
	p := &j.c.Plan
	var s *site.Activities
	first := 0
	for _, b := range j.c.Queue {
		if b.Run == p.Run {
			first = max(first, b.Index+1)
		}
	}
	discover := func(in site.DiscoverInput) (*site.DiscoverOutput, error) {
		var out site.DiscoverOutput
		// Batches named by attempt: a stalled attempt's late write is never read.
		in.AttemptNames = true
		sctx := workflow.WithActivityOptions(ctx, siteOptions(p, 0)) // p.Site may have changed
		if err := workflow.ExecuteActivity(sctx, s.Discover, in).Get(ctx, &out); err != nil {
			return nil, err
		}
		for _, b := range out.Batches {
			j.c.Queue = append(j.c.Queue, vocab.BatchRef{Run: p.Run, Index: b.Index, Rule: b.Rule, N: b.N, Attempt: b.Attempt})
			first = max(first, b.Index+1)
		}
		return &out, nil
	}
	if !p.Resubmit && j.version >= jobV1 {
		return j.discoverPages(ctx, discover, first)
	}
	if !p.Resubmit {
		out, err := discover(site.DiscoverInput{JobID: j.jobID, Run: p.Run, Mode: p.Discovery, Paths: p.Paths,
			Include: p.Include, Exclude: p.Exclude, Rules: p.Rules, BatchSize: p.BatchSize, BatchBytes: p.BatchBytes, AutoBatch: p.AutoBatch})
		if err != nil {
			return err
		}
		j.c.Snapdiff = out.Snapdiff
		if err := j.call(j.hub, nil, actRecordDiscovery, DiscoveryDone{JobID: j.jobID, Run: p.Run,
			Files: out.Files, Failed: out.Failed, Final: true}); err != nil {
			return err
		}
		j.c.Prepared = true
		return nil
	}
	for pages := 0; ; pages++ {
		if pages >= jobBatchesPerRun {
			return j.continueAsNew(ctx)
		}
		var paths []string
		if err := j.call(j.hub, &paths, actFailedPathsPage, j.jobID, j.c.FailedAfter, failedPathsPage); err != nil {
			return err
		}
		if len(paths) == 0 {
			break
		}
		j.c.FailedAfter = paths[len(paths)-1]
		// The globs go along: a policy's folder that failed is scanned
		// again, and the site's excludes are files no job may touch. A
		// recursive job's folder that failed (refused by its first walk)
		// is walked; other paths are taken as they are.
		mode := ""
		if p.Discovery == "recursive" {
			mode = p.Discovery
		}
		out, err := discover(site.DiscoverInput{JobID: j.jobID, Run: p.Run, FirstBatch: first, Mode: mode, Retry: true, Paths: paths, Rules: p.Rules,
			Include: p.Include, Exclude: p.Exclude, BatchSize: p.BatchSize, Skip: p.Leftover, Policy: p.Policy})
		if err != nil {
			return err
		}
		j.c.Pages++
		if err := j.call(j.hub, nil, actRecordDiscovery, DiscoveryDone{JobID: j.jobID, Run: p.Run,
			Files: out.Files, Failed: out.Failed, Page: j.c.Pages}); err != nil {
			return err
		}
	}
	j.c.Prepared = true
	return nil
}

// discoverPages discovers the job's paths a page at a time: the hub reads
// a page from the job's record, the site discovers it into batches, the
// hub records what it found. The paths never travel whole, nor ride along
// across continue-as-new: only the cursor does.
func (j *jobRun) discoverPages(ctx workflow.Context, discover func(site.DiscoverInput) (*site.DiscoverOutput, error), first int) error {
	p := &j.c.Plan
	for pages := 0; ; pages++ {
		if pages > 0 && (pages >= jobBatchesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) {
			return j.continueAsNew(ctx)
		}
		var page JobPathsPage
		err := j.call(j.hub, &page, actJobPathsPage, JobPathsRequest{JobID: j.jobID, Next: j.c.PathsNext,
			Limit: pathsPageLimit, MaxBytes: pathsPageBytes})
		if err != nil {
			return err
		}
		p.Site = page.Site
		out := &site.DiscoverOutput{}
		if len(page.Paths) > 0 {
			out, err = discover(site.DiscoverInput{JobID: j.jobID, Run: p.Run, FirstBatch: first, Mode: p.Discovery,
				Paths: page.Paths, Include: p.Include, Exclude: p.Exclude, Rules: p.Rules, BatchSize: p.BatchSize,
				BatchBytes: p.BatchBytes, AutoBatch: p.AutoBatch, Skip: p.Leftover, Policy: p.Policy})
			if err != nil {
				return err
			}
			for _, b := range out.Batches {
				first = max(first, b.Index+1)
			}
		}
		if out.Snapdiff != "" {
			j.c.Snapdiff = out.Snapdiff
		}
		j.c.Pages++
		j.c.PathsNext = page.Next
		j.c.Found += out.Files + int64(len(out.Failed))
		err = j.call(j.hub, nil, actRecordDiscovery, DiscoveryDone{JobID: j.jobID, Run: p.Run, Files: out.Files,
			Failed: out.Failed, Final: page.Done, Page: j.c.Pages, Paged: true, Found: j.c.Found})
		if err != nil {
			return err
		}
		if page.Done {
			j.c.Prepared = true
			return nil
		}
	}
}

// continueAsNew hands the job to a new run. Signals not yet seen by the
// signal coroutine are applied first: the carry is encoded right here, and
// a pause or resume must not be lost with this run.
func (j *jobRun) continueAsNew(ctx workflow.Context) error {
	for {
		switch {
		case j.pause.Len() > 0:
			j.apply(j.pause, ctx, true)
		case j.resume.Len() > 0:
			j.apply(j.resume, ctx, false)
		default:
			// Plans loaded before paged discovery held the paths: the
			// next run does not need them.
			j.c.Plan.Paths = nil
			return workflow.NewContinueAsNewError(ctx, JobWorkflowName, JobInput{JobID: j.jobID, Carry: &j.c})
		}
	}
}

// apply takes a pause (paused) or resume signal from c. A signal carries
// its number, taken in the order the requests reached the database: one
// numbered before the last applied is stale. Two signals can reach the
// workflow in another order (two hub processes, a request retried), and
// two that reach one workflow task are not taken in the order they came
// (each has its channel). A signal without a number (sent by an earlier
// hub, the Temporal UI or CLI) applies as it comes.
func (j *jobRun) apply(c workflow.ReceiveChannel, ctx workflow.Context, paused bool) {
	var seq int64
	c.Receive(ctx, &seq)
	if j.signalOrder && seq != 0 && seq < j.c.SignalSeq {
		return
	}
	j.c.Paused, j.c.SignalSeq = paused, max(j.c.SignalSeq, seq)
}

// dispatch runs one batch through its rule's chain in a coroutine.
func (j *jobRun) dispatch(ctx workflow.Context, b vocab.BatchRef) {
	j.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { j.inFlight--; j.sinceRun++; j.wake++ }()
		switch err := j.runBatch(ctx, b); {
		case err == nil:
			j.c.Done++
		case temporal.IsCanceledError(err) || ctx.Err() != nil:
			j.cancelled = append(j.cancelled, b)
		default:
			workflow.GetLogger(ctx).Error("batch aborted", "job", j.jobID, "batch", b.Index, "error", err)
			j.c.Aborted = append(j.c.Aborted, b)
			j.c.Done++
		}
	})
}

func (j *jobRun) runBatch(ctx workflow.Context, b vocab.BatchRef) error {
	p := &j.c.Plan
	var s *site.Activities
	// A context belongs to its coroutine: this batch's bookkeeping gets
	// its own disconnected context.
	hctx := hubContext(ctx)
	if j.version >= jobV1 {
		if err := j.refreshSite(hctx); err != nil {
			return err
		}
	}
	sctx := workflow.WithActivityOptions(ctx, j.stepOptions(p, p.StepTimeout))
	var failedAtDest []string // by the destination of the step before
	for k, step := range p.Chains[b.Rule] {
		var taskID int64
		err := j.call(hctx, &taskID, actStartTask, TaskStart{JobID: j.jobID, Site: p.Site, Queue: p.Queue,
			Run: p.Run, Batch: b.Index, BatchRun: b.Run, Step: k, Name: step.Name, NumPaths: b.N})
		if err != nil {
			return err
		}
		var out site.StepOutput
		targets := p.Targets
		if step.DestSite != "" {
			targets = step.Shared
		}
		in := site.StepInput{JobID: j.jobID, Run: b.Run, Batch: b.Index, BatchAttempt: b.Attempt,
			Step: k, Name: step.Name, Params: step.Params, Targets: targets, FailedAtDestination: failedAtDest,
			Include: p.Include, Exclude: p.Exclude}
		if j.rerunState {
			in.InRun = p.Run
		}
		stepErr := workflow.ExecuteActivity(sctx, s.RunStep, in).Get(ctx, &out)
		var unrecorded int64
		if k == 0 && stepErr == nil {
			unrecorded = int64(len(out.Outcomes))
			j.unrecorded += unrecorded
		}
		failedAtDest = nil
		if stepErr == nil && step.DestSite != "" {
			out.Outcomes, stepErr = j.receive(ctx, step, out.Outcomes)
			for _, o := range out.Outcomes {
				if o.State != site.OutcomeSuccess {
					failedAtDest = append(failedAtDest, o.Path)
				}
			}
		}
		end := TaskEnd{JobID: j.jobID, TaskID: taskID, Outcomes: out.Outcomes}
		if stepErr != nil {
			end.State, end.Error = vocab.TaskError, stepErr.Error()
			var timeout *temporal.TimeoutError
			switch {
			case temporal.IsCanceledError(stepErr) || ctx.Err() != nil:
				end.State = vocab.TaskCancelled
			case errors.As(stepErr, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
				end.Error = fmt.Sprintf("invalid: not finished within task_invalidation_timeout (%s) of being handed to site %s",
					stepOptions(p, p.StepTimeout).ScheduleToCloseTimeout, p.Site)
			}
		}
		err = j.call(hctx, nil, actFinishTask, end)
		j.unrecorded -= unrecorded
		if err != nil {
			return err
		}
		if stepErr != nil {
			return stepErr
		}
	}
	return nil
}

// receive runs the destination half of send/site_sync on the destination
// site's queue and returns the final outcome of every path.
func (j *jobRun) receive(ctx workflow.Context, step StepPlan, src []site.Outcome) ([]site.Outcome, error) {
	var final []site.Outcome
	in := site.ReceiveInput{JobID: j.jobID, Step: step.Name, Targets: step.Shared}
	in.DestPath, _ = step.Params["destination_path"].(string)
	in.Hydrate, _ = step.Params["hydrate"].(bool)
	in.Preference, _ = step.Params["sync_preference"].(string)
	for _, o := range src {
		if o.State == site.OutcomeSuccess && o.Sent != nil {
			in.Files = append(in.Files, *o.Sent)
		} else {
			final = append(final, site.Outcome{Path: o.Path, State: o.State, Message: o.Message})
		}
	}
	if len(in.Files) == 0 {
		return final, nil
	}
	opts := j.stepOptions(&JobPlan{Site: step.DestSite, Queue: step.DestQueue}, j.c.Plan.StepTimeout)
	var s *site.Activities
	var out site.StepOutput
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), s.Receive, in).Get(ctx, &out); err != nil {
		return nil, err
	}
	return append(final, out.Outcomes...), nil
}

// stepOptions are the options of a step on the plan's site: from jobV1 on,
// a cancelled step is waited for until it has stopped (its worker sees
// the cancellation at its next heartbeat), so that nothing still runs at
// the site once the job is recorded CANCELLED and can be resubmitted.
func (j *jobRun) stepOptions(p *JobPlan, timeout time.Duration) workflow.ActivityOptions {
	o := stepOptions(p, timeout)
	o.WaitForCancellation = j.version >= jobV1
	return o
}

// refreshSite looks the job's site up by id (it may have been renamed
// since the plan was made): its task queues are named after its current
// name.
func (j *jobRun) refreshSite(hctx workflow.Context) error {
	var ref SiteRef
	if err := j.call(hctx, &ref, actJobSite, j.jobID); err != nil {
		return err
	}
	j.c.Plan.Site = ref.Name
	return nil
}

// syncPauseState records PAUSING/PAUSED/STARTED as the pause flag and the
// batches in flight change.
func (j *jobRun) syncPauseState() error {
	want := vocab.JobStarted
	if j.c.Paused {
		want = vocab.JobPaused
		if j.inFlight > 0 {
			want = vocab.JobPausing
		}
	}
	if want == j.state {
		return nil
	}
	return j.setState(want, false)
}

func (j *jobRun) finish(ctx workflow.Context) error {
	var s *site.Activities
	var out JobOutcome
	err := j.call(j.hub, &out, actFinishJob, JobEnd{JobID: j.jobID, Run: j.c.Plan.Run, State: vocab.JobSuccess,
		Aborted: j.c.Aborted, Snapdiff: j.c.Snapdiff})
	if err != nil {
		return err
	}
	if out.Superseded {
		workflow.GetLogger(ctx).Warn("job resubmitted before this run's end was recorded: left as it is", "job", j.jobID)
		return nil
	}
	j.state = out.State
	_ = workflow.UpsertTypedSearchAttributes(j.hub, HubJobState.ValueSet(out.State))
	if out.State == vocab.JobSuccess && !out.HasFailures {
		if j.version >= jobV1 {
			if err := j.refreshSite(j.hub); err != nil {
				// The job or its site is gone since: nothing left to do there.
				workflow.GetLogger(ctx).Warn("job's site not found after its end", "job", j.jobID, "error", err)
				return nil
			}
		}
		sctx := workflow.WithActivityOptions(j.hub, siteOptions(&j.c.Plan, time.Hour))
		if j.c.Snapdiff != "" {
			if err := workflow.ExecuteActivity(sctx, s.CommitSnapdiff, j.c.Snapdiff).Get(ctx, nil); err != nil {
				return err
			}
		}
		// Nothing is left to resubmit: the batch files can go.
		_ = workflow.ExecuteActivity(sctx, s.CleanupJob, j.jobID).Get(ctx, nil)
	}
	return nil
}

// cancel waits for the batches in flight to stop (their steps see the
// cancellation at their next heartbeat), then records the job CANCELLED
// with every batch not finished kept for resubmit.
func (j *jobRun) cancel(ctx workflow.Context) error {
	_ = workflow.Await(j.hub, func() bool { return j.inFlight == 0 })
	if err := j.recordCancelled(); err != nil {
		return err
	}
	return temporal.NewCanceledError()
}

// recordCancelled records the job CANCELLED, keeping every batch not
// finished for a resubmit.
func (j *jobRun) recordCancelled() error {
	left := append(append([]vocab.BatchRef{}, j.cancelled...), j.c.Queue[j.c.Next:]...)
	var out JobOutcome
	err := j.call(j.hub, &out, actFinishJob, JobEnd{JobID: j.jobID, Run: j.c.Plan.Run, State: vocab.JobCancelled,
		Cancelled: left, Aborted: j.c.Aborted, Snapdiff: j.c.Snapdiff})
	if err != nil || out.Superseded {
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(j.hub, HubJobState.ValueSet(vocab.JobCancelled))
	return nil
}

// fail ends a job whose preparation failed for good.
func (j *jobRun) fail(ctx workflow.Context, cause error) error {
	// A cancellation that arrived while discovery was about to continue as
	// new ends the job here: the new run would not be cancelled.
	if ctx.Err() != nil {
		return j.cancel(ctx)
	}
	var cne *workflow.ContinueAsNewError
	if errors.As(cause, &cne) {
		return cause
	}
	workflow.GetLogger(ctx).Error("job failed", "job", j.jobID, "error", cause)
	// Batches not run yet stay queued for a resubmit.
	left := append(append([]vocab.BatchRef{}, j.cancelled...), j.c.Queue[min(j.c.Next, len(j.c.Queue)):]...)
	var out JobOutcome
	if err := j.call(j.hub, &out, actFinishJob, JobEnd{JobID: j.jobID, Run: j.c.Plan.Run,
		State: vocab.JobFailure, Cancelled: left, Aborted: j.c.Aborted, Error: failureReason(cause), Snapdiff: j.c.Snapdiff}); err != nil || out.Superseded {
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(j.hub, HubJobState.ValueSet(vocab.JobFailure))
	return cause
}

// failureReason is what the job's record says about cause: the message of
// the error an activity failed with, without Temporal's wrapping.
func failureReason(cause error) string {
	var app *temporal.ApplicationError
	if errors.As(cause, &app) {
		return app.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(cause, &timeout) {
		return fmt.Sprintf("timed out (%s)", timeout.TimeoutType())
	}
	return cause.Error()
}
