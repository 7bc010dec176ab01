package workflows_test

import (
	"context"
	"encoding/json"
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

// TestSettingsWorkflowRecordsEachOutcome: one site applies, one fails for
// good, one is refreshed; each task's outcome is recorded on its own.
func TestSettingsWorkflowRecordsEachOutcome(t *testing.T) {
	t.Parallel()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	hub := &hubact.Activities{}
	sa := &site.Activities{}
	env.RegisterActivity(hub)
	env.RegisterActivity(sa)

	env.OnActivity(hub.StartSettingsTasks, mock.Anything, []int64{1, 2, 3}).Return(nil).Once()
	env.OnActivity(sa.ApplySettings, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in site.ApplySettingsInput) (site.ApplySettingsResult, error) {
			if activity.GetInfo(ctx).TaskQueue == workflows.SiteTaskQueue("broken", vocab.DefaultQueue) {
				return site.ApplySettingsResult{}, temporal.NewNonRetryableApplicationError("disk full", "io", nil)
			}
			return site.ApplySettingsResult{Set: []string{in.Values[0].Key}, Deleted: []string{}}, nil
		})
	env.OnActivity(sa.ReadSettings, mock.Anything).Return(map[string]json.RawMessage{"a:b": json.RawMessage(`1`)}, nil)
	env.OnActivity(hub.ImportSiteSettings, mock.Anything, workflows.ImportSiteSettingsInput{Site: "s3",
		Applied: map[string]json.RawMessage{"a:b": json.RawMessage(`1`)}}).Return(workflows.ImportSiteSettingsResult{Created: []string{"a:b"}}, nil)
	outcomes := map[int64]workflows.SettingsTaskOutcome{}
	env.OnActivity(hub.FinishSettingsTask, mock.Anything, mock.Anything).Return(
		func(_ context.Context, o workflows.SettingsTaskOutcome) error { outcomes[o.TaskID] = o; return nil })

	value := []site.SettingValue{{Key: "log:level", Value: json.RawMessage(`"debug"`)}}
	env.ExecuteWorkflow(workflows.SettingsWorkflow, workflows.SettingsWorkflowInput{Targets: []workflows.SettingsTarget{
		{TaskID: 1, Site: "ok", Values: value},
		{TaskID: 2, Site: "broken", Values: value},
		{TaskID: 3, Site: "s3", Refresh: true},
	}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.SettingsWorkflowResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, workflows.SettingsWorkflowResult{Succeeded: 2, Failed: 1}, res)

	require.Equal(t, vocab.TaskSuccess, outcomes[1].State)
	require.JSONEq(t, `{"set":["log:level"],"deleted":[],"file":""}`, string(outcomes[1].Results))
	require.Equal(t, vocab.TaskFailure, outcomes[2].State)
	require.Contains(t, string(outcomes[2].Results), "disk full")
	require.Equal(t, vocab.TaskSuccess, outcomes[3].State)
	require.JSONEq(t, `{"created":["a:b"],"skipped":null}`, string(outcomes[3].Results))
	require.Equal(t, "settings-12", workflows.SettingsWorkflowID(12))
}
