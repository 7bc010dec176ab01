package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// Intent kinds: what a committed change owes Temporal.
const (
	// KindStart starts a workflow (payload Start) that has no record to
	// fail (a job cleanup, a NAS users sync).
	KindStart = "start"
	// KindJobStart starts run Run of job RefID (payload JobStart).
	KindJobStart = "job.start"
	// KindJobCancel asks job RefID's workflow to cancel.
	KindJobCancel = "job.cancel"
	// KindAction starts the workflow of action RefID (payload Start).
	KindAction = "action.start"
	// KindBucketDelete starts the deletion of bucket RefID (payload Start).
	KindBucketDelete = "bucket.delete"
	// KindSettings starts a SettingsWorkflow (payload Settings).
	KindSettings = "settings.start"
	// KindSpaceOps hands ops to space RefID's workflow (payload
	// workflows.SpaceOps), which claims them.
	KindSpaceOps = "space.ops"
	// KindCJChange hands C+J item RefID's newest generation to its
	// workflow (payload CJChange).
	KindCJChange = "cj.change"
)

// Start is the payload of a workflow start.
type Start struct {
	ID       string
	Workflow string
	Input    json.RawMessage
}

// NewStart builds a Start of workflow with input.
func NewStart(id, workflow string, input any) (Start, error) {
	raw, err := json.Marshal(input)
	return Start{ID: id, Workflow: workflow, Input: raw}, err
}

// JobStart is the payload of KindJobStart.
type JobStart struct{ Run int }

// Settings is the payload of KindSettings.
type Settings struct {
	Start
	TaskIDs []int64
}

// CJChange is the payload of KindCJChange.
type CJChange struct {
	Site, Type string
	Generation int64
}

type kind struct {
	deliver func(ctx context.Context, s *Service, in *models.Intent) error
	// fail marks the record when the intent can never be delivered.
	fail func(ctx context.Context, s *Service, in *models.Intent, cause error) error
	// claimed: the workflow claims the intent (see Claim), so delivery
	// leaves it DELIVERED rather than deleting it.
	claimed bool
}

var kinds = map[string]kind{
	KindStart:        {deliver: deliverStart, fail: logOnly},
	KindJobStart:     {deliver: deliverJobStart, fail: failJob},
	KindJobCancel:    {deliver: deliverJobCancel, fail: logOnly},
	KindAction:       {deliver: deliverStart, fail: failAction},
	KindBucketDelete: {deliver: deliverStart, fail: failBucketDelete},
	KindSettings:     {deliver: deliverSettings, fail: failSettings},
	KindSpaceOps:     {deliver: deliverSpaceOps, fail: failSpaceOps, claimed: true},
	KindCJChange:     {deliver: deliverCJChange, fail: failCJChange},
	// The reconciler keeps schedules in step whatever happens to these.
	KindScheduleSync: {deliver: deliverScheduleSync, fail: logOnly},
	KindSearchCancel: {deliver: deliverSearchCancel, fail: logOnly},
}

func decode(in *models.Intent, v any) error {
	if err := json.Unmarshal([]byte(in.Payload), v); err != nil {
		return fmt.Errorf("%w: payload: %v", errPermanent, err)
	}
	return nil
}

func alreadyStarted(err error) bool {
	var as *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &as) || temporal.IsWorkflowExecutionAlreadyStartedError(err)
}

// deliverStart starts a workflow whose ID names one piece of work: a run
// already started, or finished well, is that work delivered.
func deliverStart(ctx context.Context, s *Service, in *models.Intent) error {
	var st Start
	if err := decode(in, &st); err != nil {
		return err
	}
	return s.start(ctx, st)
}

func (s *Service) start(ctx context.Context, st Start) error {
	opts := client.StartWorkflowOptions{ID: st.ID, TaskQueue: workflows.HubTaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true}
	_, err := s.Temporal.ExecuteWorkflow(ctx, opts, st.Workflow, st.Input)
	if alreadyStarted(err) {
		return nil
	}
	return err
}

func logOnly(context.Context, *Service, *models.Intent, error) error { return nil }

// deliverJobStart starts run Run of a job. The job's workflow ID is the
// same for every run: a workflow already running that is this run means
// delivered; an earlier run still closing is waited for (the reconciler
// tries again). A run that is no longer pending was delivered; should a
// start still reach a workflow twice, the run sees that the job is not
// pending for it and ends without work (see JobInput.Run).
func deliverJobStart(ctx context.Context, s *Service, in *models.Intent) error {
	var p JobStart
	if err := decode(in, &p); err != nil {
		return err
	}
	j, err := models.GetJob(ctx, s.DB, in.RefID)
	if errors.Is(err, models.ErrNotFound) {
		return nil // deleted since: nothing to start
	} else if err != nil {
		return err
	}
	if j.Run != p.Run || (j.State != vocab.JobPending && j.State != vocab.JobCancelling) {
		return nil // the run began (or was replaced) already: delivered
	}
	id := workflows.JobWorkflowID(j.ID)
	if j.State == vocab.JobCancelling {
		// Cancelled before its start was delivered, the job is started all
		// the same: its run records it CANCELLED (the cancellation found no
		// workflow to reach). Unless this run began already, running or
		// not: one that closed without recording its end is the cancel's
		// to end (EndJob), not a second workflow's.
		run, err := s.runningJobRun(ctx, id)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return err
		}
		if err == nil && run == p.Run {
			return nil
		}
	}
	site := s.jobSiteName(ctx, j)
	opts := client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.HubTaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     map[string]any{"run": p.Run},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.HubSite.ValueSet(site), workflows.HubWorkflow.ValueSet(j.Workflow),
			workflows.HubJobID.ValueSet(j.ID), workflows.HubJobState.ValueSet(vocab.JobPending)),
	}
	start := func() error {
		_, err := s.Temporal.ExecuteWorkflow(ctx, opts, workflows.JobWorkflowName, workflows.JobInput{JobID: j.ID, Run: p.Run})
		return err
	}
	if err := start(); !alreadyStarted(err) {
		return err
	}
	running, err := s.runningJobRun(ctx, id)
	if err != nil || running == p.Run {
		return err
	}
	// The previous run recorded its end and is closing: wait for it a
	// moment (its result does not matter), then start once more.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_ = awaitResult(wctx, s.Temporal, s.Temporal.GetWorkflow(wctx, id, ""), nil)
	cancel()
	if err := start(); !alreadyStarted(err) {
		return err
	}
	return fmt.Errorf("run %d of job %d is still closing", running, j.ID)
}

// runningJobRun is the run number the job workflow id's latest execution
// (running or closed) serves (0 for a workflow started before runs were
// recorded in its memo).
func (s *Service) runningJobRun(ctx context.Context, id string) (int, error) {
	d, err := s.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, err
	}
	var run int
	if f := d.GetWorkflowExecutionInfo().GetMemo().GetFields()["run"]; f != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(f, &run); err != nil {
			return 0, err
		}
	}
	return run, nil
}

// failJob ends the job FAILURE, saying why on the job.
func failJob(ctx context.Context, s *Service, in *models.Intent, cause error) error {
	why := "the job engine refused to start the job: " + cause.Error()
	err := models.UpdateJob(ctx, s.DB, in.RefID, models.JobUpdate{State: vocab.JobFailure, Completed: true, Error: &why})
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	return err
}

// deliverJobCancel requests cancellation; a job whose workflow is gone is
// ended by CancelJob's check instead.
func deliverJobCancel(ctx context.Context, s *Service, in *models.Intent) error {
	err := s.Temporal.CancelWorkflow(ctx, workflows.JobWorkflowID(in.RefID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

func failAction(ctx context.Context, s *Service, in *models.Intent, cause error) error {
	return models.FinishAction(ctx, s.DB, in.RefID, vocab.ActionFailure, "the job engine refused the action: "+cause.Error())
}

func failBucketDelete(ctx context.Context, s *Service, in *models.Intent, _ error) error {
	_, err := models.SetBucketSoftDeleting(ctx, s.DB, in.RefID, false)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	return err
}

func deliverSettings(ctx context.Context, s *Service, in *models.Intent) error {
	var p Settings
	if err := decode(in, &p); err != nil {
		return err
	}
	return s.start(ctx, p.Start)
}

func failSettings(ctx context.Context, s *Service, in *models.Intent, _ error) error {
	var p Settings
	if err := json.Unmarshal([]byte(in.Payload), &p); err != nil {
		return nil // nothing to mark
	}
	failed, _ := json.Marshal(map[string]string{"error": "the settings workflow could not be started"})
	for _, id := range p.TaskIDs {
		if err := models.FinishSettingsTask(ctx, s.DB, id, vocab.TaskFailure, failed); err != nil && !errors.Is(err, models.ErrNotFound) {
			return err
		}
	}
	return nil
}

// deliverSpaceOps signals the space's workflow, starting it if none runs.
// The ops carry the intent's id: the workflow claims it before acting, so
// ops delivered twice run once.
func deliverSpaceOps(ctx context.Context, s *Service, in *models.Intent) error {
	var ops workflows.SpaceOps
	if err := decode(in, &ops); err != nil {
		return err
	}
	ops.Change = in.ID
	id := workflows.SpaceWorkflowID(in.RefID)
	_, err := s.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SpaceOpsSignal, ops,
		client.StartWorkflowOptions{ID: id, TaskQueue: workflows.HubTaskQueue}, workflows.SpaceWorkflowName,
		workflows.SpaceInput{SpaceID: in.RefID})
	return err
}

// failSpaceOps marks the folders the ops were to create as failed, so the
// space shows the error and saving it again retries.
func failSpaceOps(ctx context.Context, s *Service, in *models.Intent, cause error) error {
	var ops workflows.SpaceOps
	if err := json.Unmarshal([]byte(in.Payload), &ops); err != nil {
		return nil
	}
	for _, op := range ops.Ops {
		if op.Action != workflows.SpaceCreate {
			continue
		}
		err := models.RecordSpaceSite(ctx, s.DB, in.RefID, op.Site, vocab.SpaceSiteError, "the job engine could not be reached: "+cause.Error())
		if err != nil && !errors.Is(err, models.ErrNotFound) {
			return err
		}
	}
	return nil
}

// deliverCJChange hands the item's newest generation to its workflow,
// which keeps the highest generation it has seen: delivering twice is
// delivering once.
func deliverCJChange(ctx context.Context, s *Service, in *models.Intent) error {
	var p CJChange
	if err := decode(in, &p); err != nil {
		return err
	}
	opts := client.StartWorkflowOptions{ID: workflows.ResourceChangeWorkflowID(p.Type, in.RefID), TaskQueue: workflows.HubTaskQueue}
	_, err := s.Temporal.SignalWithStartWorkflow(ctx, opts.ID, workflows.ResourceChangeSignal,
		workflows.ResourceChange{Generation: p.Generation}, opts, workflows.ResourceChangeWorkflowName,
		workflows.ResourceChangeInput{Site: p.Site, Type: p.Type, ItemID: in.RefID})
	return err
}

// failCJChange: as the contract says of job errors, the item becomes
// ERRORED with the cause in its log (a deletion is undone); an empty
// PATCH retries.
func failCJChange(ctx context.Context, s *Service, in *models.Intent, _ error) error {
	var p CJChange
	if err := json.Unmarshal([]byte(in.Payload), &p); err != nil {
		return nil
	}
	it, err := models.GetCJItemByID(ctx, s.DB, in.RefID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	entry := models.CJLogEntry{Time: time.Now().UTC(), Level: "error", Generation: p.Generation,
		Message: "the job engine could not be reached; the change was not started (send an empty PATCH to retry)"}
	if err := models.AppendCJLog(ctx, s.DB, it.ID, entry); err != nil {
		return err
	}
	if it.Deleted {
		_, err = models.RestoreCJItem(ctx, s.DB, it.ID, p.Generation)
	} else {
		_, err = models.SetCJStatus(ctx, s.DB, it.ID, p.Generation, models.CJErrored)
	}
	return err
}
