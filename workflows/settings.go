package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// SettingsWorkflowName is the registered name of SettingsWorkflow.
const SettingsWorkflowName = "SettingsWorkflow"

// SettingsWorkflowID names the run after its first settings task, so the
// settings tasks' task_id leads to it in the Temporal UI.
func SettingsWorkflowID(firstTaskID int64) string { return fmt.Sprintf("settings-%d", firstTaskID) }

// SettingsTarget is one settings task: apply Values at Site, or, with
// Refresh, read the site's applied settings into the hub.
type SettingsTarget struct {
	TaskID  int64
	Site    string
	Refresh bool
	Values  []site.SettingValue
}

// SettingsWorkflowInput lists the settings tasks of one request.
type SettingsWorkflowInput struct {
	Targets []SettingsTarget
}

// SettingsWorkflowResult counts the tasks by outcome.
type SettingsWorkflowResult struct {
	Succeeded, Failed int
}

// settingsHubOptions: database writes are quick; retry a while through a
// database restart.
var settingsHubOptions = workflow.ActivityOptions{
	TaskQueue:           HubTaskQueue,
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 20},
}

// settingsSiteOptions: writing one small file is quick; a site whose
// workers are down fails its task after ScheduleToClose instead of holding
// it STARTED forever (POST /api/settings/sync/ sends the settings again).
var settingsSiteOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    time.Minute,
	ScheduleToCloseTimeout: 30 * time.Minute,
	RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: time.Minute},
}

// SettingsWorkflow runs one activity per site on the site's default queue,
// concurrently, and records each settings task's outcome as soon as its
// site answers.
func SettingsWorkflow(ctx workflow.Context, in SettingsWorkflowInput) (SettingsWorkflowResult, error) {
	var res SettingsWorkflowResult
	hubCtx := workflow.WithActivityOptions(ctx, settingsHubOptions)
	ids := make([]int64, len(in.Targets))
	for i, t := range in.Targets {
		ids[i] = t.TaskID
	}
	if err := workflow.ExecuteActivity(hubCtx, actStartSettingsTasks, ids).Get(ctx, nil); err != nil {
		return res, err
	}
	wg := workflow.NewWaitGroup(ctx)
	var firstErr error
	for _, t := range in.Targets {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			outcome := runSettingsTarget(ctx, t)
			if outcome.State == vocab.TaskSuccess {
				res.Succeeded++
			} else {
				res.Failed++
			}
			if err := workflow.ExecuteActivity(hubCtx, actFinishSettingsTask, outcome).Get(ctx, nil); err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait(ctx)
	return res, firstErr
}

// runSettingsTarget does one task's site work and returns its outcome.
func runSettingsTarget(ctx workflow.Context, t SettingsTarget) SettingsTaskOutcome {
	var sa *site.Activities
	opts := settingsSiteOptions
	opts.TaskQueue = SiteTaskQueue(t.Site, vocab.DefaultQueue)
	siteCtx := workflow.WithActivityOptions(ctx, opts)
	var results any
	var err error
	if t.Refresh {
		var applied map[string]json.RawMessage
		if err = workflow.ExecuteActivity(siteCtx, sa.ReadSettings).Get(ctx, &applied); err == nil {
			hubCtx := workflow.WithActivityOptions(ctx, settingsHubOptions)
			var imported ImportSiteSettingsResult
			err = workflow.ExecuteActivity(hubCtx, actImportSiteSettings,
				ImportSiteSettingsInput{Site: t.Site, Applied: applied}).Get(ctx, &imported)
			results = imported
		}
	} else {
		var applied site.ApplySettingsResult
		err = workflow.ExecuteActivity(siteCtx, sa.ApplySettings, site.ApplySettingsInput{Values: t.Values}).Get(ctx, &applied)
		results = applied
	}
	state := vocab.TaskSuccess
	if err != nil {
		state, results = vocab.TaskFailure, map[string]string{"error": err.Error()}
	}
	data, mErr := json.Marshal(results)
	if mErr != nil {
		data = []byte(`{}`)
	}
	return SettingsTaskOutcome{TaskID: t.TaskID, State: state, Results: data}
}
