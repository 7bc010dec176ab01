package workflows

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/workflows/vocab"
)

// ActionWorkflowName is the registered name of ActionWorkflow.
const ActionWorkflowName = "ActionWorkflow"

// ActionWorkflowID names the workflow of one action.
func ActionWorkflowID(id int64) string { return fmt.Sprintf("action-%d", id) }

// Actions are the operator actions POST /actions/ accepts, with what each
// does.
var Actions = map[string]string{
	"maintenance":    "purge jobs older than jobs_ttl and raise the stuck-job alerts now",
	"refresh_sites":  "refresh every site's counts, storage pools and servers",
	"sync_nas_users": "send the NAS users to every site",
	"collect_remote_copies": "free the remote copies no premigrated file or stub refers to any more " +
		"(after they spent the grace period in the target's trash)",
}

// ActionNames lists the actions, sorted.
func ActionNames() []string {
	names := make([]string, 0, len(Actions))
	for n := range Actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ActionInput names the action record and what it asks.
type ActionInput struct {
	ID     int64
	Action string
}

// ActionWorkflow runs an operator action: STARTED, then the action's own
// workflows as children, then SUCCESS or FAILURE with a summary in the
// action's results. Every failure of a part ends in FAILURE; only the
// database being unreachable for the hub's retries leaves it unrecorded.
func ActionWorkflow(ctx workflow.Context, in ActionInput) error {
	hctx := workflow.WithActivityOptions(ctx, catalogueHubOptions)
	record := func(state, results string) error {
		return workflow.ExecuteActivity(hctx, actRecordAction, ActionState{ID: in.ID, State: state, Results: results}).Get(ctx, nil)
	}
	if err := record(vocab.ActionStarted, ""); err != nil {
		return err
	}
	child := func(suffix string) workflow.Context {
		return workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s-%s", ActionWorkflowID(in.ID), suffix)})
	}
	var results []string
	failed := false
	fail := func(what string, err error) {
		failed = true
		results = append(results, fmt.Sprintf("%s: %v", what, err))
	}
	switch in.Action {
	case "maintenance":
		var res MaintenanceResult
		if err := workflow.ExecuteChildWorkflow(child("maintenance"), MaintenanceWorkflowName).Get(ctx, &res); err != nil {
			fail("maintenance", err)
		} else {
			results = append(results, fmt.Sprintf("purged %d jobs; %d not-started and %d not-progressed job alerts",
				res.Purged, res.NotStarted, res.NotProgressed))
		}
	case "refresh_sites":
		var sites []SiteRef
		if err := workflow.ExecuteActivity(hctx, actListSites).Get(ctx, &sites); err != nil {
			fail("list the sites", err)
		}
		// The children take the sites' own refresh ids, so a refresh already
		// running for a site (POST /sites/{id}/refresh/) is not doubled.
		futures := make([]workflow.ChildWorkflowFuture, len(sites))
		for i, s := range sites {
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: SiteRefreshWorkflowID(s.Name)})
			futures[i] = workflow.ExecuteChildWorkflow(cctx, SiteRefreshWorkflowName,
				SiteRefreshInput{SiteID: s.ID, Site: s.Name, Queue: vocab.DefaultQueue})
		}
		for i, f := range futures {
			switch err := f.Get(ctx, nil); {
			case temporal.IsWorkflowExecutionAlreadyStartedError(err):
				results = append(results, "site "+sites[i].Name+": a refresh was already running")
			case err != nil:
				fail("site "+sites[i].Name, err)
			default:
				results = append(results, "site "+sites[i].Name+": refreshed")
			}
		}
	case "sync_nas_users":
		var plan NASUsers
		var res NASUsersSyncResult
		if err := workflow.ExecuteActivity(hctx, actNASUsersPlan).Get(ctx, &plan); err != nil {
			fail("read the NAS users", err)
		} else if err := workflow.ExecuteChildWorkflow(child("nas-users"), NASUsersSyncWorkflowName, plan).Get(ctx, &res); err != nil {
			fail("NAS users sync", err)
		}
		for _, name := range plan.Sites {
			if msg, bad := res.Errors[name]; bad {
				fail("site "+name, fmt.Errorf("%s", msg))
			} else if n, ok := res.Applied[name]; ok {
				results = append(results, fmt.Sprintf("site %s: %d NAS users applied", name, n))
			}
		}
	case "collect_remote_copies":
		var sum CollectSummary
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: CollectWorkflowID})
		switch err := workflow.ExecuteChildWorkflow(cctx, CollectWorkflowName).Get(ctx, &sum); {
		case temporal.IsWorkflowExecutionAlreadyStartedError(err):
			results = append(results, "a collection was already running")
		case err != nil:
			fail("collect", err)
		}
		for _, t := range sum.Targets {
			if t.Error != "" {
				fail("target "+t.Name, errors.New(t.Error))
				continue
			}
			r := t.Result
			results = append(results, fmt.Sprintf("target %s: %d copies, %d moved to the trash, %d restored, %d deleted",
				t.Name, r.Objects, r.Trashed, r.Restored, r.Deleted))
		}
	default:
		fail("unknown action "+in.Action, fmt.Errorf("known actions are %s", strings.Join(ActionNames(), ", ")))
	}
	state := vocab.ActionSuccess
	if failed {
		state = vocab.ActionFailure
	}
	return record(state, strings.Join(results, "\n"))
}
