package hub_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobAlertsAndPurge: job outcomes raise the alerts the configuration
// asks for, and the maintenance schedule purges jobs past jobs_ttl and
// alerts on jobs that never started. The batch files a job with failures
// keeps at its site go when the job is purged or deleted.
func TestJobAlertsAndPurge(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) { testJobAlertsAndPurge(t, e) })
}

func testJobAlertsAndPurge(t *testing.T, e *apitest.Env) {
	ctx := context.Background()
	e.StartHubWorker()
	s := newJobSite(t, e, "alerty")
	makeTree(t, s.root, 30)
	_, err := e.DB.NewUpdate().Table("external_targets").Set("local_file_regex = ?", "^/data/d0").Where("1 = 1").Exec(ctx)
	require.NoError(t, err)
	job := runJob(t, e, "alerty", "premigrate", []string{"/data"}, nil)
	require.Equal(t, true, job["has_failures"], job)

	alerts := func() map[string]bool {
		r := e.AsAdmin(http.MethodGet, "/api/alerts/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		names := map[string]bool{}
		for _, a := range r.JSON().([]any) {
			names[a.(map[string]any)["name"].(string)] = true
		}
		return names
	}
	got := alerts()
	require.True(t, got["job_completed_has_failures"], got)
	if !got["job_inprogress_failing"] {
		// Seen missing once on PostgreSQL (not reproduced since): say
		// what the job's tasks were, for the next time.
		tasks := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/?job=%v&page_size=0", job["id"]), nil)
		t.Fatalf("no job_inprogress_failing alert: alerts %v\njob %v\ntasks %s", got, job, tasks.Body)
	}
	require.False(t, got["job_completed_success"], "alert_completed_success_jobs is off by default")

	// An old finished job (of the site under the name it had then: the
	// purge finds the site by id) and a job stuck PENDING.
	site, err := models.GetSiteByName(ctx, e.DB, "alerty")
	require.NoError(t, err)
	old := &models.Job{Workflow: "premigrate", Site: "alerty-before-its-rename", SiteID: site.ID, Queue: "default", OwnerType: models.OwnerSystem,
		Definition: models.JobDefinition{Name: "premigrate"}}
	require.NoError(t, models.CreateJob(ctx, e.DB, old))
	require.NoError(t, models.UpdateJob(ctx, e.DB, old.ID, models.JobUpdate{State: vocab.JobSuccess, Completed: true}))
	_, err = e.DB.NewUpdate().Model((*models.Job)(nil)).Set("completed = ?", time.Now().Add(-100*24*time.Hour)).Where("id = ?", old.ID).Exec(ctx)
	require.NoError(t, err)
	stuck := &models.Job{Workflow: "premigrate", Site: "alerty", SiteID: 1, Queue: "default", OwnerType: models.OwnerUnknown,
		Definition: models.JobDefinition{Name: "premigrate"}}
	require.NoError(t, models.CreateJob(ctx, e.DB, stuck))
	_, err = e.DB.NewUpdate().Model((*models.Job)(nil)).Set("created = ?", time.Now().Add(-time.Hour)).Where("id = ?", stuck.ID).Exec(ctx)
	require.NoError(t, err)

	jobDir := func(id int64) string { return filepath.Join(s.root, ".hub", "jobs", fmt.Sprint(id)) }
	require.NoError(t, os.MkdirAll(filepath.Join(jobDir(old.ID), "r0"), 0o755))
	jobID := int64(job["id"].(float64))
	require.DirExists(t, jobDir(jobID), "kept for a resubmit of the failures")

	require.NoError(t, e.Temporal.ScheduleClient().GetHandle(ctx, workflows.MaintenanceScheduleID).Trigger(ctx, client.ScheduleTriggerOptions{}))
	require.Eventually(t, func() bool {
		_, err := models.GetJob(ctx, e.DB, old.ID)
		return err == models.ErrNotFound && alerts()["job_notstarted"]
	}, time.Minute, 200*time.Millisecond)
	require.Eventually(t, func() bool { return noFile(jobDir(old.ID)) }, time.Minute, 100*time.Millisecond, "purged job's batch files")
	_, err = models.GetJob(ctx, e.DB, jobID)
	require.NoError(t, err, "recent jobs are kept")
	require.DirExists(t, jobDir(jobID))

	r := e.AsAdmin(http.MethodDelete, fmt.Sprintf("/api/jobs/%d/", jobID), nil)
	require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return noFile(jobDir(jobID)) }, time.Minute, 100*time.Millisecond, "deleted job's batch files")
	apitest.RecordHistories(t, e.Temporal)
}

func noFile(name string) bool {
	_, err := os.Stat(name)
	return errors.Is(err, fs.ErrNotExist)
}
