package hub_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// seedTask records a task the way the engine's activities do.
func seedTask(t *testing.T, e *apitest.Env, task models.Task) *models.Task {
	t.Helper()
	require.NoError(t, models.CreateTask(t.Context(), e.DB, &task))
	return &task
}

func TestTasks(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		now := time.Now().UTC()
		j := seedJob(t, e, models.Job{Site: "alpha", Workflow: "migrate"}, vocab.JobStarted, now)
		k := seedJob(t, e, models.Job{Site: "beta", Workflow: "migrate"}, vocab.JobPending, now)
		step := func(job *models.Job, batch, step int) string {
			return fmt.Sprintf("job-%d-r1-b%d-r1-s%d", job.ID, batch, step)
		}
		disc := seedTask(t, e, models.Task{JobID: j.ID, TaskType: models.TaskDiscovery, TaskID: fmt.Sprintf("job-%d-r1-discovery", j.ID),
			State: vocab.TaskFailure, NumPaths: 1})
		copy0 := seedTask(t, e, models.Task{JobID: j.ID, Site: "alpha", Queue: "default", TaskType: "copy", TaskID: step(j, 0, 0),
			State: vocab.TaskFailure, NumPaths: 3, Started: ptr(now.Add(-90 * time.Second)), Completed: ptr(now),
			Result: map[string]any{"succeeded": 2, "failed": 1}, FriendlyName: "copy of batch 0"})
		stub0 := seedTask(t, e, models.Task{JobID: j.ID, Site: "alpha", Queue: "default", TaskType: "stub", TaskID: step(j, 0, 1),
			State: vocab.TaskStarted, Step: 1, NumPaths: 3, Started: ptr(now)})
		copy1 := seedTask(t, e, models.Task{JobID: j.ID, Site: "alpha", Queue: "default", TaskType: "copy", TaskID: step(j, 1, 0),
			State: vocab.TaskFailure, Batch: 1, NumPaths: 2})
		other := seedTask(t, e, models.Task{JobID: k.ID, Site: "beta", Queue: "default", TaskType: "copy", TaskID: step(k, 0, 0),
			State: vocab.TaskPending})
		require.NoError(t, models.RecordOutcomes(ctx, e.DB, j.ID, copy0.ID, []models.PathOutcome{
			{Path: "/d/a", State: vocab.TaskSuccess, Code: "ok", Message: "copied"},
			{Path: "/d/b", State: vocab.TaskSuccess, Code: "ok", Message: "copied"},
			{Path: "/d/c", State: vocab.TaskFailure, Code: "failed", Message: "disk full"}}))
		require.NoError(t, models.RecordOutcomes(ctx, e.DB, j.ID, stub0.ID, []models.PathOutcome{{Path: "/d/a", State: vocab.TaskSuccess, Code: "ok", Message: "stubbed"}}))

		tests := []struct {
			query string
			want  []int64 // newest first
		}{
			{"", []int64{other.ID, copy1.ID, stub0.ID, copy0.ID, disc.ID}},
			{"tasktype=copy", []int64{other.ID, copy1.ID, copy0.ID}},
			{"task_id=" + step(j, 0, 1), []int64{stub0.ID}},
			{"state=STARTED", []int64{stub0.ID}},
			{"state[]=failure&state[]=SUCCESS", []int64{copy1.ID, copy0.ID, disc.ID}},
			{"state=FAILURE,PENDING", []int64{other.ID, copy1.ID, copy0.ID, disc.ID}},
			{fmt.Sprintf("job_id=%d", j.ID), []int64{copy1.ID, stub0.ID, copy0.ID, disc.ID}},
			{"job_id=999999", []int64{}},
			{"internal=true", []int64{disc.ID}},
			{"internal=false", []int64{other.ID, copy1.ID, stub0.ID, copy0.ID}},
			{fmt.Sprintf("tasktype=copy&job_id=%d&state=FAILURE&internal=false", j.ID), []int64{copy1.ID, copy0.ID}},
		}
		for _, tc := range tests {
			r := e.AsAdmin(http.MethodGet, "/api/tasks/?"+tc.query, nil)
			require.Equal(t, tc.want, resultIDs(t, r), tc.query)
		}
		for q, field := range map[string]string{"state=BOGUS": "state", "job_id=x": "job_id", "internal=maybe": "internal"} {
			r := e.AsAdmin(http.MethodGet, "/api/tasks/?"+q, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, q)
			require.Contains(t, r.Map(), field, q)
		}

		// List rows: the parent is the previous step of the same batch.
		r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/?job_id=%d", j.ID), nil)
		rows := map[float64]map[string]any{}
		for _, x := range r.Map()["results"].([]any) {
			rows[x.(map[string]any)["id"].(float64)] = x.(map[string]any)
		}
		sr := rows[float64(stub0.ID)]
		require.Equal(t, []any{float64(copy0.ID)}, sr["dynamic_parents"])
		require.Equal(t, fmt.Sprint(copy0.ID), sr["parents"])
		require.Equal(t, []any{}, rows[float64(copy1.ID)]["dynamic_parents"])
		require.Equal(t, "", rows[float64(disc.ID)]["parents"])
		require.NotContains(t, sr, "result", "detail only")
		require.Equal(t, "stub", sr["tasktype"])
		require.Equal(t, "alpha", sr["site"])
		require.Equal(t, "default", sr["queue"])
		require.Equal(t, float64(j.ID), sr["job"])
		require.Contains(t, sr["url"], fmt.Sprintf("/api/tasks/%d/", stub0.ID))

		// Detail.
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/%d/", copy0.ID), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		d := r.Map()
		require.Equal(t, "copy of batch 0", d["friendly_name"])
		require.Equal(t, float64(3), d["paths"])
		require.Equal(t, map[string]any{"succeeded": float64(2), "failed": float64(1)}, d["result"])
		require.NotNil(t, d["completed"])
		require.Equal(t, "00:01:30", d["runtime"])
		require.Equal(t, []any{}, d["dynamic_parents"])
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/%d/", copy1.ID), nil)
		require.Nil(t, r.Map()["runtime"], "never started")
		require.Nil(t, r.Map()["completed"])
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/%d/", stub0.ID), nil)
		require.Equal(t, []any{float64(copy0.ID)}, r.Map()["dynamic_parents"])
		require.NotNil(t, r.Map()["runtime"], "running: time so far")

		// Files: the task record with a page of its outcomes.
		files := func(id int64, q string) apitest.Response {
			return e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/tasks/%d/files/%s", id, q), nil)
		}
		r = files(copy0.ID, "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		body := r.Map()
		require.Equal(t, float64(copy0.ID), body["id"])
		require.Equal(t, "copy", body["tasktype"])
		page := body["files"].(map[string]any)
		require.Equal(t, float64(3), page["count"])
		require.Nil(t, page["next"])
		first := page["results"].([]any)[0].(map[string]any)
		require.Equal(t, "/d/a", first["path"])
		require.Equal(t, float64(copy0.ID), first["task"])
		require.Equal(t, "SUCCESS", first["state"])
		count := func(id int64, q string) float64 {
			r := files(id, q)
			require.Equal(t, http.StatusOK, r.Status, q+string(r.Body))
			return r.Map()["files"].(map[string]any)["count"].(float64)
		}
		require.Equal(t, float64(1), count(copy0.ID, "?state=FAILURE"))
		require.Equal(t, float64(3), count(copy0.ID, "?state=success&state=failure"))
		require.Equal(t, float64(3), count(copy0.ID, "?type=file"), "type is accepted and ignored")
		require.Equal(t, float64(3), count(copy0.ID, "?site=alpha"))
		require.Equal(t, float64(0), count(copy0.ID, "?site=beta"))
		require.Equal(t, float64(1), count(stub0.ID, ""))
		require.Equal(t, float64(0), count(other.ID, ""))
		require.Equal(t, http.StatusBadRequest, files(copy0.ID, "?state=nope").Status)
		require.Equal(t, http.StatusNotFound, files(copy0.ID, "?page=2").Status)

		for _, p := range []string{"/api/tasks/999999/", "/api/tasks/abc/", "/api/tasks/999999/files/"} {
			require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, p, nil).Status, p)
		}
	})
}
