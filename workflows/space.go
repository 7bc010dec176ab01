package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// Names of the space workflow and its signal.
const (
	SpaceWorkflowName = "SpaceWorkflow"
	// SpaceOpsSignal carries SpaceOps: the API signals-with-start, so
	// changes to one space run in order in one workflow.
	SpaceOpsSignal = "space-ops"
)

// SpaceWorkflowID is one workflow per space at a time.
func SpaceWorkflowID(spaceID int64) string { return fmt.Sprintf("space-%d", spaceID) }

// Actions of a SpaceOp.
const (
	SpaceCreate = "create"
	SpaceRemove = "remove"
	// ShareSync writes a share's file on the site, or removes it, as the
	// share is when the op runs (hub activity ShareOnSite).
	ShareSync = "share-sync"
)

// SpaceOp creates or removes, on one site, a space's directory or the
// configuration file of one of its shares.
type SpaceOp struct {
	Site       string
	Queue      string
	Action     string // SpaceCreate, SpaceRemove or ShareSync
	Mountpoint string
	Mode       string
	Share      ShareRef // for ShareSync
}

// SpaceOps is the payload of SpaceOpsSignal.
type SpaceOps struct {
	Ops []SpaceOp
	// Change is the hub's intent that carries the ops (activities/changes):
	// the workflow claims it before acting, so ops delivered twice run
	// once. 0 in signals sent before intents existed.
	Change int64
}

// SpaceInput identifies the space; the work arrives by signal.
type SpaceInput struct {
	SpaceID int64
}

// SpaceOutcome is what one op did.
type SpaceOutcome struct {
	Op      SpaceOp
	Outcome string // a site.SpaceDir* outcome, or "error"
	Message string
}

// SpaceResult lists every op's outcome in the order they ran.
type SpaceResult struct {
	Outcomes []SpaceOutcome
}

// spaceDirOptions: creating or removing a directory is quick; a site whose
// workers are down fails the op after ScheduleToClose, recorded as an error.
func spaceDirOptions(site, queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              SiteTaskQueue(site, queue),
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: time.Minute},
	}
}

// SpaceWorkflow runs the ops it is signalled, one at a time and in order,
// until none is left: creations record the directory's state on the
// space's site link; removals delete only empty directories, and a kept
// one is reported in the result and the workflow log.
func SpaceWorkflow(ctx workflow.Context, in SpaceInput) (SpaceResult, error) {
	var res SpaceResult
	var siteActs *site.Activities
	ch := workflow.GetSignalChannel(ctx, SpaceOpsSignal)
	hctx := workflow.WithActivityOptions(ctx, catalogueHubOptions)
	var queue []SpaceOp
	for {
		var ops SpaceOps
		for ch.ReceiveAsync(&ops) {
			if ops.Change != 0 {
				var first bool
				if err := workflow.ExecuteActivity(hctx, actClaimChange, ops.Change).Get(ctx, &first); err != nil {
					return res, err
				}
				if !first {
					continue // delivered twice: acted on already
				}
			}
			queue = append(queue, ops.Ops...)
		}
		if len(queue) == 0 {
			return res, nil
		}
		op := queue[0]
		queue = queue[1:]
		var fn, arg any = siteActs.CreateSpaceDir, site.SpaceDirInput{Mountpoint: op.Mountpoint, Mode: op.Mode}
		var err error
		switch op.Action {
		case SpaceRemove:
			fn = siteActs.RemoveSpaceDir
		case ShareSync:
			var want ShareOnSite
			err = workflow.ExecuteActivity(hctx, actShareOnSite, op.Share).Get(ctx, &want)
			fn, arg = siteActs.RemoveShare, want.Config
			if want.Write {
				fn = siteActs.WriteShare
			}
		}
		var dr site.SpaceDirResult
		if err == nil {
			sctx := workflow.WithActivityOptions(ctx, spaceDirOptions(op.Site, op.Queue))
			err = workflow.ExecuteActivity(sctx, fn, arg).Get(ctx, &dr)
		}
		out := SpaceOutcome{Op: op, Outcome: dr.Outcome, Message: dr.Message}
		if err != nil {
			out.Outcome, out.Message = vocab.SpaceSiteError, err.Error()
		}
		if out.Outcome == site.SpaceDirKept {
			workflow.GetLogger(ctx).Warn("space directory kept", "space", in.SpaceID, "site", op.Site, "message", out.Message)
		}
		res.Outcomes = append(res.Outcomes, out)
		if op.Action != SpaceCreate {
			continue
		}
		state := SpaceSiteState{SpaceID: in.SpaceID, Site: op.Site, State: vocab.SpaceSiteReady, Message: out.Message}
		if err != nil {
			state.State = vocab.SpaceSiteError
		}
		if err := workflow.ExecuteActivity(hctx, actRecordSpaceSite, state).Get(ctx, nil); err != nil {
			return res, err
		}
	}
}
