package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// TestASettingsTaskShowsValuesOnlyToThoseWhoMayReadSettings: a settings
// task's request and results carry setting values. A member of Users (no
// view_setting, but view_settingstask) was refused the settings and read
// a secret one in the task that carried it (a reviewer's finding).
func TestASettingsTaskShowsValuesOnlyToThoseWhoMayReadSettings(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		_, err := models.EnsureSite(t.Context(), e.DB, "east")
		require.NoError(t, err)
		bob := apitest.Bearer(e.CreateUser("bob"))
		r := e.AsAdmin(http.MethodPatch, "/api/settings/", map[string]any{"values": []any{
			map[string]any{"key": "s3:secret_token", "value": "hunter2-very-secret"}}})
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		task := "/api/settingstasks/" + catID(r.Map()["tasks"].([]any)[0].(map[string]any)["task_id"].(float64)) + "/"

		require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, "/api/settings/", bob, nil).Status)
		r = e.Do(http.MethodGet, task, bob, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.NotContains(t, string(r.Body), "hunter2-very-secret")
		r = e.AsAdmin(http.MethodGet, task, nil)
		require.Contains(t, string(r.Body), "hunter2-very-secret", "shown to those who may read settings")
	})
}

// TestAResubmitIsRefusedWhereANewJobWouldBe: a resubmit starts a run of
// the job's workflow, and is refused as a new job of it would be: a
// workflow an administrator disabled since ran again through a user's
// resubmit of an old job (a reviewer's finding).
func TestAResubmitIsRefusedWhereANewJobWouldBe(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	ctx := context.Background()
	_, err := models.EnsureSite(ctx, e.DB, "west")
	require.NoError(t, err)
	alice := apitest.Bearer(e.CreateUser("alice"))
	r := e.Do(http.MethodPost, "/api/file/workflow/", alice, map[string]any{"site": "west", "workflow": "premigrate", "paths": []string{"/a"}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	id := int64(r.Map()["job"].(float64))
	_, err = e.DB.NewUpdate().Model((*models.Job)(nil)).Set("state = ?", "FAILURE").Where("id = ?", id).Exec(ctx)
	require.NoError(t, err)

	wf, err := models.GetWorkflowByName(ctx, e.DB, "premigrate")
	require.NoError(t, err)
	r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/workflows/%d/", wf.ID), map[string]any{"enabled": false})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	r = e.Do(http.MethodPost, fmt.Sprintf("/api/jobs/%d/resubmit/", id), alice, nil)
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "This workflow is disabled.")
	j, err := models.GetJob(ctx, e.DB, id)
	require.NoError(t, err)
	require.Equal(t, 1, j.Run)
}

// TestAGroupNamingAUserTwiceHasThemOnce: a user named twice in a group's
// users was a 500 (the second insert's key conflict); they are a member
// once.
func TestAGroupNamingAUserTwiceHasThemOnce(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.CreateUser("carl")
		r := e.AsAdmin(http.MethodPost, "/api/groups/", map[string]any{"name": "g1", "users": []string{"carl", "carl"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, []any{"carl"}, r.Map()["users"])
	})
}
