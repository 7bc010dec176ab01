package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// describeSchedule is Temporal's view of schedule id's Temporal Schedule,
// or nil when it has none.
func describeSchedule(t *testing.T, e *apitest.Env, id string) *client.ScheduleDescription {
	d, err := e.Temporal.ScheduleClient().GetHandle(context.Background(), id).Describe(context.Background())
	if err != nil {
		return nil
	}
	return d
}

// fireEvery2s narrows Temporal Schedule id's spec to every 2 s, as an
// operator editing it in the Web UI would, so that a test sees it fire.
func fireEvery2s(t *testing.T, e *apitest.Env, id string) {
	t.Helper()
	ctx := context.Background()
	h := e.Temporal.ScheduleClient().GetHandle(ctx, id)
	require.NoError(t, h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		in.Description.Schedule.Spec = &client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: 2 * time.Second}}}
		return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
	}}))
}

func createSchedule(t *testing.T, e *apitest.Env, body map[string]any) int64 {
	t.Helper()
	r := e.AsAdmin(http.MethodPost, "/api/schedules/", body)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	return int64(r.Map()["id"].(float64))
}

func TestScheduleRecordsAndTheirTemporalSchedules(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, e.DB, "north")
		require.NoError(t, err)
		site.Timezone = "Europe/Paris"
		_, err = e.DB.NewUpdate().Model(site).Column("timezone").WherePK().Exec(ctx)
		require.NoError(t, err)

		// Bad input is a 400 naming the field.
		for field, body := range map[string]map[string]any{
			"site":          {"name": "s", "site": "nowhere"},
			"minute":        {"name": "s", "site": "north", "minute": "61"},
			"day_of_week":   {"name": "s", "site": "north", "day_of_week": "FUNDAY"},
			"hour":          {"name": "s", "site": "north", "hour": "1 2"},
			"discovery":     {"name": "s", "site": "north", "discovery": "deep"},
			"managed_paths": {"name": "s", "site": "north", "managed_paths": map[string]any{"/ok": map[string]any{}, "rel": map[string]any{}}},
			"name":          {"site": "north"},
		} {
			r := e.AsAdmin(http.MethodPost, "/api/schedules/", body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Body)
			found := false
			for k := range r.Map() {
				found = found || k == field || len(k) > len(field) && k[:len(field)] == field
			}
			require.True(t, found, "the error names %s: %s", field, r.Body)
		}

		id := createSchedule(t, e, map[string]any{"name": "nightly", "site": "north", "minute": "30", "hour": "2",
			"day_of_week": "MON-FRI", "managed_paths": map[string]any{"/data": map[string]any{}}})
		got := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/schedules/%d/", id), nil).Map()
		require.Equal(t, "north", got["site"])
		require.Equal(t, true, got["enabled"])
		require.Equal(t, "MON-FRI", got["day_of_week"])

		// The record is one Temporal Schedule, in the site's timezone.
		tid := workflows.ScheduleTemporalID(id)
		d := describeSchedule(t, e, tid)
		require.NotNil(t, d, "the Temporal Schedule exists")
		require.Equal(t, "Europe/Paris", d.Schedule.Spec.TimeZoneName)
		require.False(t, d.Schedule.State.Paused)
		next := d.Info.NextActionTimes
		require.NotEmpty(t, next)
		paris, _ := time.LoadLocation("Europe/Paris")
		at := next[0].In(paris)
		require.Equal(t, 2, at.Hour(), "fires at 02:30 Paris time: %v", at)
		require.Equal(t, 30, at.Minute())
		require.NotContains(t, []time.Weekday{time.Saturday, time.Sunday}, at.Weekday())

		// enabled: false pauses it.
		r := e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.True(t, describeSchedule(t, e, tid).Schedule.State.Paused)
		other := createSchedule(t, e, map[string]any{"name": "hourly", "site": "north", "minute": "0", "hour": "*"})
		otherID := workflows.ScheduleTemporalID(other)

		// schedules_enabled: false pauses every schedule, and the schedules
		// feature says so; turning it back restores each one's own state.
		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"schedules_enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.True(t, describeSchedule(t, e, otherID).Schedule.State.Paused)
		require.Equal(t, false, e.AsAdmin(http.MethodGet, "/api/features/schedules/", nil).Map()["enabled"])
		r = e.AsAdmin(http.MethodPatch, "/api/features/schedules/", map[string]any{"enabled": true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, true, e.AsAdmin(http.MethodGet, "/api/configurations/", nil).Map()["schedules_enabled"])
		require.False(t, describeSchedule(t, e, otherID).Schedule.State.Paused, "enabled schedule runs again")
		require.True(t, describeSchedule(t, e, tid).Schedule.State.Paused, "disabled schedule stays paused")

		// Filters and the automated list.
		list := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/schedules/?site_id=%d", site.ID), nil).Map()
		require.EqualValues(t, 2, list["count"])
		require.EqualValues(t, 0, e.AsAdmin(http.MethodGet, "/api/schedules/?site_id=99999", nil).Map()["count"])
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/schedules/?space_id=x", nil).Status)
		auto := e.AsAdmin(http.MethodGet, "/api/automatedschedules/", nil).Map()
		require.EqualValues(t, 2, auto["count"], auto)
		first := auto["results"].([]any)[0].(map[string]any)
		require.Equal(t, "schedule", first["schedule_type"])
		require.Equal(t, tid, first["temporal_schedule_id"])

		// Deleting the record deletes its Temporal Schedule.
		r = e.AsAdmin(http.MethodDelete, fmt.Sprintf("/api/schedules/%d/", other), nil)
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		require.Nil(t, describeSchedule(t, e, otherID))
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/schedules/%d/", other), nil).Status)
	})
}

func TestScheduleDriftIsReconciled(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		_, err := models.EnsureSite(ctx, e.DB, "north")
		require.NoError(t, err)

		// Temporal is away during the write: the record is stored, its
		// schedule is owed.
		e.API.Changes.Temporal = apitest.UnreachableTemporal(t)
		id := createSchedule(t, e, map[string]any{"name": "weekly", "site": "north", "day_of_week": "0"})
		tid := workflows.ScheduleTemporalID(id)
		e.API.Changes.Temporal = e.Temporal
		require.Nil(t, describeSchedule(t, e, tid))
		_, err = e.API.Changes.ReconcileSchedules(ctx)
		require.NoError(t, err)
		require.NotNil(t, describeSchedule(t, e, tid), "the reconciler created it")

		// Deleted by hand in the UI: created again.
		require.NoError(t, e.Temporal.ScheduleClient().GetHandle(ctx, tid).Delete(ctx))
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			return err == nil && describeSchedule(t, e, tid) != nil
		}, 30*time.Second, 200*time.Millisecond)

		// Paused by hand: the record (enabled) wins.
		require.NoError(t, e.Temporal.ScheduleClient().GetHandle(ctx, tid).Pause(ctx, client.SchedulePauseOptions{Note: "by hand"}))
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			d := describeSchedule(t, e, tid)
			return err == nil && d != nil && !d.Schedule.State.Paused
		}, 30*time.Second, 200*time.Millisecond)

		// In step, the pass leaves it alone, even for a cron with both a
		// day of month and a day of week.
		r := e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"day_of_month": "1-7", "day_of_week": "1", "hour": "*/6"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Eventually(t, func() bool {
			n, err := e.API.Changes.ReconcileSchedules(ctx)
			return err == nil && n == 0
		}, 30*time.Second, 500*time.Millisecond, "a schedule in step is not written again")

		// Its spec edited by hand (the note untouched): the record's is
		// written back.
		h := e.Temporal.ScheduleClient().GetHandle(ctx, tid)
		require.NoError(t, h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			in.Description.Schedule.Spec = &client.ScheduleSpec{CronExpressions: []string{"15 4 * * *"}}
			return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
		}}))
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			d := describeSchedule(t, e, tid)
			return err == nil && d != nil && len(d.Info.NextActionTimes) > 0 && d.Info.NextActionTimes[0].Minute() == 0
		}, 30*time.Second, 500*time.Millisecond, "the hand-edited spec is replaced")

		// A Temporal Schedule whose record is gone is deleted.
		require.NoError(t, models.DeleteSchedule(ctx, e.DB, id))
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			return err == nil && describeSchedule(t, e, tid) == nil
		}, 30*time.Second, 200*time.Millisecond)
	})
}

func TestScheduleRunsItsWorkflows(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		makeTree(t, s.root, 20)

		id := createSchedule(t, e, map[string]any{"name": "archive", "site": "east", "minute": "0", "hour": "3",
			"managed_paths": map[string]any{"/data": map[string]any{}}})
		base := fmt.Sprintf("/api/schedules/%d/workflows/", id)
		for field, body := range map[string]map[string]any{
			"workflow": {"workflow": "nope"},
			"queue":    {"workflow": "premigrate", "queue": "fast"},
			"site":     {"workflow": "premigrate", "site": "elsewhere"},
			"fields.x": {"workflow": "premigrate", "fields": map[string]any{"x": 1}},
		} {
			r := e.AsAdmin(http.MethodPost, base, body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Body)
			require.Contains(t, r.Map(), field, string(r.Body))
		}
		r := e.AsAdmin(http.MethodPost, base, map[string]any{"workflow": "premigrate", "site": "east"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, vocab.DefaultQueue, r.Map()["queue"])
		wid := int64(r.Map()["id"].(float64))
		require.EqualValues(t, 1, e.AsAdmin(http.MethodGet, base, nil).Map()["count"])
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("%s%d/", base, wid), map[string]any{"fields": map[string]any{}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))

		// A schedule-only workflow is refused outside a schedule, and runs
		// inside one.
		var premigrate int64
		for _, w := range e.AsAdmin(http.MethodGet, "/api/workflows/?page_size=100", nil).Map()["results"].([]any) {
			if w.(map[string]any)["name"] == "premigrate" {
				premigrate = int64(w.(map[string]any)["id"].(float64))
			}
		}
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/workflows/%d/", premigrate), map[string]any{"schedule_only": true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "east", "workflow": "premigrate", "paths": []string{"/data"}})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, r.Map()["workflow"], "This workflow can only run inside a schedule.")

		// Run now: one job, the system's, with the schedule set.
		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/run/", id), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "archive", r.Map()["name"])
		var jobs map[string]any
		require.Eventually(t, func() bool {
			jobs = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/?schedule_ids=%d", id), nil).Map()
			return jobs["count"] == float64(1)
		}, time.Minute, 200*time.Millisecond, "the firing's job: %v", jobs)
		job := waitJob(t, e, int64(jobs["results"].([]any)[0].(map[string]any)["id"].(float64)))
		require.Equal(t, vocab.JobSuccess, job["state"], job)
		require.Equal(t, "archive", job["schedule"])
		require.EqualValues(t, 20, job["numprocessedfiles"])
		require.Equal(t, "system", job["owner"].(map[string]any)["type"], job)
		require.Eventually(t, func() bool {
			resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: e.Namespace, Query: "WorkflowType = 'ScheduleWorkflow' AND ExecutionStatus = 'Completed'"})
			return err == nil && len(resp.GetExecutions()) == 1
		}, time.Minute, 200*time.Millisecond, "the firing ends once its job has")
		apitest.RecordHistories(t, e.Temporal)

		// Removing the workflow leaves the schedule with none.
		r = e.AsAdmin(http.MethodDelete, fmt.Sprintf("%s%d/", base, wid), nil)
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		require.EqualValues(t, 0, e.AsAdmin(http.MethodGet, base, nil).Map()["count"])
	})
}

// TestScheduleMovedToAnotherSite: a schedule whose site changes takes its
// workflows along (checked on the new site, refused when one cannot run
// there), and fires on the new site. Before, its workflows kept the old
// site and its firings ran there, over the paths meant for the new one.
// A space that is not on the schedule's site is refused.
func TestScheduleMovedToAnotherSite(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		newJobSite(t, e, "east")
		west := newJobSite(t, e, "west")
		makeTree(t, west.root, 5)
		ctx := context.Background()
		east, err := models.GetSiteByName(ctx, e.DB, "east")
		require.NoError(t, err)
		_, err = e.DB.NewInsert().Model(&models.Queue{SiteID: east.ID, Name: "fast"}).Exec(ctx)
		require.NoError(t, err)

		id := createSchedule(t, e, map[string]any{"name": "moving", "site": "east", "minute": "0", "hour": "3",
			"managed_paths": map[string]any{"/data": map[string]any{}}})
		base := fmt.Sprintf("/api/schedules/%d/workflows/", id)
		r := e.AsAdmin(http.MethodPost, base, map[string]any{"workflow": "premigrate", "queue": "fast"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		wid := int64(r.Map()["id"].(float64))

		// West has no queue "fast": refused, the schedule stays on east.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"site": "west"})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, fmt.Sprint(r.Map()["site"]), "cannot run on site west", string(r.Body))
		require.Equal(t, "east", e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/schedules/%d/", id), nil).Map()["site"])

		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("%s%d/", base, wid), map[string]any{"queue": vocab.DefaultQueue})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"site": "west"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		w := e.AsAdmin(http.MethodGet, fmt.Sprintf("%s%d/", base, wid), nil).Map()
		require.Equal(t, "west", w["site"], w)

		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/run/", id), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var jobs map[string]any
		require.Eventually(t, func() bool {
			jobs = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/?schedule_ids=%d", id), nil).Map()
			return jobs["count"] == float64(1)
		}, time.Minute, 200*time.Millisecond, "the firing's job: %v", jobs)
		job := waitJob(t, e, int64(jobs["results"].([]any)[0].(map[string]any)["id"].(float64)))
		require.Equal(t, vocab.JobSuccess, job["state"], job)
		require.Equal(t, "west", job["site"], job)
		require.EqualValues(t, 5, job["numprocessedfiles"])

		// A space that is not on the schedule's site.
		sp := &models.Space{Name: "lab", UUID: models.NewUUID(), Mountpoint: "/spaces/lab", PermissionMode: "user", Color: []int64{}, OnSites: map[string]any{}}
		_, err = e.DB.NewInsert().Model(sp).Exec(ctx)
		require.NoError(t, err)
		_, err = e.DB.NewInsert().Model(&models.SpaceSite{SpaceID: sp.ID, SiteID: east.ID, Usage: []int64{}}).Exec(ctx)
		require.NoError(t, err)
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"space": "lab"})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, fmt.Sprint(r.Map()["space"]), "is not on site west", string(r.Body))
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"space": "lab", "site": "east"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		// Its space leaves its site: the schedule can still be paused.
		_, err = e.DB.NewDelete().Model((*models.SpaceSite)(nil)).Where("space_id = ?", sp.ID).Exec(ctx)
		require.NoError(t, err)
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", id), map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	})
}

// TestPausedFiringsStartNothing: a Temporal Schedule's firing that began
// before its schedule or policy was disabled (it may wait long for a
// worker; Temporal's pause stops only later firings) starts no job, and
// says why; a run asked for now still runs. Before, the disabled policy
// migrated its spaces once its site came back.
func TestPausedFiringsStartNothing(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		makeTree(t, s.root, 3)
		site, err := models.GetSiteByName(ctx, e.DB, "east")
		require.NoError(t, err)
		// fire runs a firing as a Temporal Schedule does (workflow ID
		// firing-<name>-<n>, the firing's key).
		fire := func(name string, n, id int64) *workflows.FireResult {
			run, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("firing-%s-%d", name, n),
				TaskQueue: workflows.HubTaskQueue}, name, workflows.Fire{ID: id})
			require.NoError(t, err)
			var res workflows.FireResult
			require.NoError(t, run.Get(ctx, &res))
			return &res
		}

		sch := createSchedule(t, e, map[string]any{"name": "paused", "site": "east", "minute": "0", "hour": "3",
			"managed_paths": map[string]any{"/data": map[string]any{}}})
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", sch), map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		wid := recordID(t, r)
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/schedules/%d/", sch), map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		res := fire(workflows.ScheduleWorkflowName, sch, sch)
		require.Empty(t, res.Jobs)
		require.Contains(t, res.Skipped, "disabled on its record")
		// The retry of an attempt that started its job before the pause
		// goes on: it finds the job and waits for it.
		key := fmt.Sprintf("firing-%s-%d/%d/0", workflows.ScheduleWorkflowName, sch+1000, wid)
		started, _, err := e.API.Changes.SubmitJob(ctx, changes.JobRequest{Site: "east", Workflow: "premigrate", Paths: []string{"/data"},
			IdempotencyKey: &key, Owner: changes.JobOwner{ScheduleID: &sch, ScheduleName: "paused"}})
		require.NoError(t, err)
		retried := fire(workflows.ScheduleWorkflowName, sch+1000, sch)
		require.Equal(t, []int64{started.ID}, retried.Jobs, "%+v", retried)
		_, err = e.DB.NewDelete().Model((*models.Job)(nil)).Where("id = ?", started.ID).Exec(ctx)
		require.NoError(t, err)

		space := policySpace(t, e, "east", s.root, "lab")
		r = e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "tidy", "site": site.ID, "spaces": []int64{space},
			"policy_type": "premigration", "schedule": map[string]any{"minute": "0", "hour": "4"},
			"condition_groups": []any{map[string]any{"name": "all", "filesize_conditions": []any{map[string]any{"greater_or_less": "greater", "size": 0}}}}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		policy := recordID(t, r)
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", policy), map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		res = fire(workflows.PolicyWorkflowName, policy, policy)
		require.Empty(t, res.Jobs)
		require.Contains(t, res.Skipped, "disabled on its record")
		n, err := e.DB.NewSelect().Model((*models.Job)(nil)).Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "no job started")

		// A policy whose workflow is disabled is refused whole when it
		// would run at once (before, it was created, then the answer was
		// a 400, and the client's retry a name conflict).
		var premigrate float64
		for _, w := range e.AsAdmin(http.MethodGet, "/api/workflows/?page_size=100", nil).Map()["results"].([]any) {
			if w.(map[string]any)["name"] == "premigrate" {
				premigrate = w.(map[string]any)["id"].(float64)
			}
		}
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/workflows/%d/", int64(premigrate)), map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "at-once", "site": site.ID, "spaces": []int64{space},
			"policy_type": "premigration", "run_immediately": true})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, fmt.Sprint(r.Map()["workflow"]), "is disabled", string(r.Body))
		require.EqualValues(t, 1, e.AsAdmin(http.MethodGet, "/api/policies/", nil).Map()["count"], "nothing stored")
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/workflows/%d/", int64(premigrate)), map[string]any{"enabled": true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))

		// Asked for now, the disabled schedule runs.
		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/run/", sch), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Eventually(t, func() bool {
			return e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/?schedule_ids=%d", sch), nil).Map()["count"] == float64(1)
		}, time.Minute, 200*time.Millisecond)
	})
}

// TestScheduleFiresByItself lets a real Temporal Schedule fire on its
// own and finds the job it started, finished, through schedule_ids. A
// record's cron cannot say seconds, so the test narrows the Temporal
// Schedule's spec to every 2 s by hand, as an operator could in the Web
// UI; the action (workflow, input, overlap policy) stays as the hub made
// it. The reconciling pass then sees the spec differs from the record's
// (the times Temporal lists are not the cron's) and writes it back.
func TestScheduleFiresByItself(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		makeTree(t, s.root, 5)
		id := createSchedule(t, e, map[string]any{"name": "nightly", "site": "east", "minute": "30", "hour": "2",
			"managed_paths": map[string]any{"/data": map[string]any{}}})
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", id), map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))

		fireEvery2s(t, e, workflows.ScheduleTemporalID(id))
		var jobs map[string]any
		require.Eventually(t, func() bool {
			jobs = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/?schedule_ids=%d&state=SUCCESS", id), nil).Map()
			return jobs["count"] != float64(0)
		}, 60*time.Second, 500*time.Millisecond, "a job fired by the schedule: %v", jobs)
		job := jobs["results"].([]any)[0].(map[string]any)
		require.Equal(t, "nightly", job["schedule"])
		require.Equal(t, "premigrate", job["workflow"])

		// The reconciler puts the record's spec back: next firing 02:30 in
		// the site's zone, no interval.
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			d := describeSchedule(t, e, workflows.ScheduleTemporalID(id))
			return err == nil && d != nil && len(d.Schedule.Spec.Intervals) == 0 && len(d.Info.NextActionTimes) > 0 &&
				d.Info.NextActionTimes[0].UTC().Minute() == 30
		}, 30*time.Second, 500*time.Millisecond)
	})
}

// TestARepeatedHourFiresOnce: on the autumn daylight-saving change a
// daily schedule in the repeated hour (America/New_York, 01:30 on
// 2026-11-01) is fired twice by Temporal's calendar, at 01:30 EDT and at
// 01:30 EST, each firing with its own workflow ID and job keys, so the
// second ran the schedule's jobs again (a reviewer's finding). Temporal
// backfills the day here (the firings carry their scheduled times as a
// real schedule's do): the first starts the job, the second starts
// nothing and says why.
func TestARepeatedHourFiresOnce(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		makeTree(t, s.root, 3)
		st, err := models.GetSiteByName(ctx, e.DB, "east")
		require.NoError(t, err)
		st.Timezone = "America/New_York"
		_, err = e.DB.NewUpdate().Model(st).Column("timezone").WherePK().Exec(ctx)
		require.NoError(t, err)
		id := createSchedule(t, e, map[string]any{"name": "nightly", "site": "east", "minute": "30", "hour": "1",
			"managed_paths": map[string]any{"/data": map[string]any{}}})
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", id), map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		d := describeSchedule(t, e, workflows.ScheduleTemporalID(id))
		require.NotNil(t, d)
		require.Equal(t, "America/New_York", d.Schedule.Spec.TimeZoneName)

		// The two firings an hour apart, as they come: the second once
		// the first has started its job.
		h := e.Temporal.ScheduleClient().GetHandle(ctx, workflows.ScheduleTemporalID(id))
		for _, hour := range []int{5, 6} {
			require.NoError(t, h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
				Start: time.Date(2026, 11, 1, hour, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 1, hour+1, 0, 0, 0, time.UTC),
				Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}}}))
			var fired workflows.FireResult
			require.Eventually(t, func() bool {
				run := e.Temporal.GetWorkflow(ctx, fmt.Sprintf("%s-fire-2026-11-01T%02d:30:00Z", workflows.ScheduleTemporalID(id), hour), "")
				return run.Get(ctx, &fired) == nil
			}, time.Minute, 200*time.Millisecond)
		}
		results := map[string]workflows.FireResult{}
		require.Eventually(t, func() bool {
			resp, err := e.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: e.Namespace, Query: "WorkflowType = 'ScheduleWorkflow' AND ExecutionStatus = 'Completed'"})
			if err != nil || len(resp.GetExecutions()) < 2 {
				return false
			}
			for _, x := range resp.GetExecutions() {
				var res workflows.FireResult
				require.NoError(t, e.Temporal.GetWorkflow(ctx, x.GetExecution().GetWorkflowId(), x.GetExecution().GetRunId()).Get(ctx, &res))
				results[x.GetExecution().GetWorkflowId()] = res
			}
			return true
		}, time.Minute, 200*time.Millisecond, "both firings end")
		first := results[workflows.ScheduleTemporalID(id)+"-fire-2026-11-01T05:30:00Z"]  // 01:30 EDT
		second := results[workflows.ScheduleTemporalID(id)+"-fire-2026-11-01T06:30:00Z"] // 01:30 EST
		require.Len(t, first.Jobs, 1, "%v", results)
		require.Empty(t, first.Skipped)
		require.Empty(t, second.Jobs, "%v", results)
		require.Contains(t, second.Skipped, "came twice", "%v", results)
		jobs := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/?schedule_ids=%d", id), nil).Map()
		require.EqualValues(t, 1, jobs["count"], "one job for the day: %v", jobs)

		// The repeat runs when the first started nothing (the hub was
		// down then; a reviewer's finding: the day's run was lost).
		late := createSchedule(t, e, map[string]any{"name": "late", "site": "east", "minute": "30", "hour": "1",
			"managed_paths": map[string]any{"/data": map[string]any{}}})
		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", late), map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		h = e.Temporal.ScheduleClient().GetHandle(ctx, workflows.ScheduleTemporalID(late))
		require.NoError(t, h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
			Start: time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC),
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}}}))
		var repeat workflows.FireResult
		require.Eventually(t, func() bool {
			run := e.Temporal.GetWorkflow(ctx, workflows.ScheduleTemporalID(late)+"-fire-2026-11-01T06:30:00Z", "")
			return run.Get(ctx, &repeat) == nil
		}, time.Minute, 200*time.Millisecond)
		require.Len(t, repeat.Jobs, 1, "%+v", repeat)
	})
}

// TestIndexScanSchedule: the configuration's file_index_scan_schedule
// makes one Temporal Schedule per site (indexscan-<site id>) that runs
// the site's file index scan; a bad cron line is a 400 naming the field,
// and emptying it removes the schedules.
func TestIndexScanSchedule(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		makeTree(t, s.root, 5)
		east, err := models.GetSiteByName(ctx, e.DB, "east")
		require.NoError(t, err)
		id := workflows.IndexScanTemporalID(east.ID)

		r := e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"file_index_scan_schedule": "every night"})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, string(r.Body), "file_index_scan_schedule")
		_, err = e.API.Changes.ReconcileSchedules(ctx)
		require.NoError(t, err)
		require.Nil(t, describeSchedule(t, e, id), "no scan is scheduled by default")

		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"file_index_scan_schedule": "15 3 * * *"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var d *client.ScheduleDescription
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			d = describeSchedule(t, e, id)
			return err == nil && d != nil
		}, 30*time.Second, 200*time.Millisecond)
		require.Equal(t, workflows.ScanFileIndexWorkflowName, d.Schedule.Action.(*client.ScheduleWorkflowAction).Workflow)
		require.Equal(t, 15, d.Info.NextActionTimes[0].UTC().Minute())

		// Narrowed to every 2 s, it runs the scan by itself.
		fireEvery2s(t, e, id)
		var out site.ScanFileIndexOutput
		require.Eventually(t, func() bool {
			d := describeSchedule(t, e, id)
			if d == nil || len(d.Info.RecentActions) == 0 {
				return false
			}
			run := d.Info.RecentActions[0].StartWorkflowResult
			return e.Temporal.GetWorkflow(ctx, run.WorkflowID, run.FirstExecutionRunID).Get(ctx, &out) == nil
		}, 60*time.Second, 500*time.Millisecond)
		require.GreaterOrEqual(t, out.Entries, int64(5), "the scheduled scan walked the site")
		require.False(t, out.Index.Scanned.IsZero())

		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"file_index_scan_schedule": ""})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Eventually(t, func() bool {
			_, err := e.API.Changes.ReconcileSchedules(ctx)
			return err == nil && describeSchedule(t, e, id) == nil
		}, 30*time.Second, 200*time.Millisecond, "emptied, the schedule is gone")
	})
}

// TestCronFieldsAreCheckedAsTemporalReadsThem: a cron field Temporal's
// schedules refuse ("?", which robfig's parser reads as "*") is a 400
// naming the field, for schedules, policies' schedules, snapshot
// schedules and the index scan; so is a day that never comes in the
// months given. Before, "?" was accepted (201): its Temporal Schedule was
// never made and every reconciling pass failed on it; 31 February made a
// schedule that never fired.
func TestCronFieldsAreCheckedAsTemporalReadsThem(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, e.DB, "north")
		require.NoError(t, err)
		space := labSpace(t, e, "north")

		for _, tc := range []struct {
			fields map[string]any
			field  string
		}{
			{map[string]any{"minute": "?"}, "minute"},
			{map[string]any{"hour": "?"}, "hour"},
			{map[string]any{"day_of_month": "?"}, "day_of_month"},
			{map[string]any{"month_of_year": "?"}, "month_of_year"},
			{map[string]any{"day_of_week": "?"}, "day_of_week"},
			{map[string]any{"day_of_week": "MON,?"}, "day_of_week"},
			{map[string]any{"day_of_month": "31", "month_of_year": "2"}, "day_of_month"},
			{map[string]any{"day_of_month": "30", "month_of_year": "FEB"}, "day_of_month"},
			{map[string]any{"day_of_month": "31", "month_of_year": "4,6,9,11"}, "day_of_month"},
		} {
			body := map[string]any{"name": "s", "site": "north"}
			policy := map[string]any{}
			for k, v := range tc.fields {
				body[k], policy[k] = v, v
			}
			r := e.AsAdmin(http.MethodPost, "/api/schedules/", body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", tc.fields, r.Body)
			require.Contains(t, r.Map(), tc.field, "%v: %s", tc.fields, r.Body)
			r = e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "p", "site": site.ID, "spaces": []int64{space},
				"schedule": policy})
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", tc.fields, r.Body)
			require.Contains(t, r.Map(), "schedule."+tc.field, "%v: %s", tc.fields, r.Body)
		}
		r := e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/spaces/%d/", space), map[string]any{
			"snapshot_schedule": map[string]any{"frequency": "0 3 ? * *", "time": "03:00", "duration": "7d"}})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, r.Map(), "snapshot_schedule.frequency", string(r.Body))
		r = e.AsAdmin(http.MethodPatch, "/api/configurations/", map[string]any{"file_index_scan_schedule": "0 3 ? * *"})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, r.Map(), "file_index_scan_schedule", string(r.Body))

		// 29 February comes in leap years; names and steps Temporal reads.
		for i, fields := range []map[string]any{
			{"day_of_month": "29", "month_of_year": "2"},
			{"day_of_week": "MON-FRI/2", "month_of_year": "jan-mar", "minute": "*/100"},
		} {
			body := map[string]any{"name": fmt.Sprintf("ok%d", i), "site": "north"}
			for k, v := range fields {
				body[k] = v
			}
			id := createSchedule(t, e, body)
			d := describeSchedule(t, e, workflows.ScheduleTemporalID(id))
			require.NotNil(t, d, "%v: its Temporal Schedule exists", fields)
			require.NotEmpty(t, d.Info.NextActionTimes, "%v fires", fields)
		}
		n, err := e.API.Changes.ReconcileSchedules(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "every schedule accepted is in step")
	})
}

// TestScheduleWorkflowsNeedPaths: a schedule's workflows run over its
// managed paths, or its space's folder: a workflow added to a schedule
// with neither, or the last of them removed from a schedule with
// workflows, is a 400. Before, both were accepted and every firing then
// failed ("managed_paths: At least one path is required").
func TestScheduleWorkflowsNeedPaths(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		newJobSite(t, e, "east")
		bare := createSchedule(t, e, map[string]any{"name": "bare", "site": "east"})
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", bare), map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, fmt.Sprint(r.Map()["non_field_errors"]), "neither a space nor managed paths", string(r.Body))

		// Given managed paths, it takes the workflow; they can change,
		// but not go while it has workflows.
		path := "/api/schedules/" + fmt.Sprint(bare) + "/"
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"managed_paths": map[string]any{"/data": map[string]any{}}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPost, path+"workflows/", map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"managed_paths": map[string]any{"/other": map[string]any{}}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"managed_paths": map[string]any{}})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, r.Map(), "managed_paths", string(r.Body))

		// A space's folder will do instead; its space then cannot go.
		r = e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "lab", "mountpoint": "/spaces/lab",
			"sites": []any{map[string]any{"name": "east", "label": "e"}}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"space": "lab", "managed_paths": map[string]any{}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"space": ""})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, r.Map(), "space", string(r.Body))
		r = e.AsAdmin(http.MethodPatch, path, map[string]any{"enabled": false})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	})
}

// TestAScheduleFiringSkipsASpaceItsSiteLeft: a schedule of a space, its
// site then leaving the space (its folder there removed): each firing
// started a job over the gone folder, which failed. The firing now starts
// nothing and says why, as a policy passes over such a space.
func TestAScheduleFiringSkipsASpaceItsSiteLeft(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		space := policySpace(t, e, "east", s.root, "lab")
		sch := createSchedule(t, e, map[string]any{"name": "lab-nightly", "site": "east", "space": "lab", "minute": "0", "hour": "3"})
		r := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", sch), map[string]any{"workflow": "premigrate"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/spaces/%d/", space), map[string]any{"sites": []any{}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))

		run, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("firing-lab-%d", sch),
			TaskQueue: workflows.HubTaskQueue}, workflows.ScheduleWorkflowName, workflows.Fire{ID: sch})
		require.NoError(t, err)
		var res workflows.FireResult
		require.NoError(t, run.Get(ctx, &res))
		require.Empty(t, res.Jobs)
		require.Contains(t, res.Skipped, "its site has left its space lab")
		n, err := e.DB.NewSelect().Model((*models.Job)(nil)).Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "no job started")
	})
}
