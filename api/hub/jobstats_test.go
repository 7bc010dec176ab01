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

func TestJobStats(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		now := time.Now().UTC()
		j := seedJob(t, e, models.Job{Site: "alpha", Workflow: "migrate"}, vocab.JobStarted, now)
		k := seedJob(t, e, models.Job{Site: "beta", Workflow: "migrate"}, vocab.JobStarted, now)
		task := func(job *models.Job, n int) *models.Task {
			return seedTask(t, e, models.Task{JobID: job.ID, Site: job.Site, Queue: "default", TaskType: "copy",
				TaskID: fmt.Sprintf("job-%d-r%d-b0-r%d-s0", job.ID, n, n), State: vocab.TaskStarted, Run: n})
		}
		t1, t2, tk := task(j, 1), task(j, 2), task(k, 1)
		require.NoError(t, models.RecordOutcomes(ctx, e.DB, j.ID, t1.ID, []models.PathOutcome{
			{Path: "/d/a", State: vocab.TaskSuccess, Code: "ok", Message: "done"},
			{Path: "/d/b", State: vocab.TaskFailure, Code: "failed", Message: "busy"},
			{Path: "/d/sub/c", State: vocab.TaskFailure, Code: "failed", Message: "busy"},
			{Path: "/dx/e", State: vocab.TaskSkipped, Code: "skipped", Message: "excluded"}}))
		require.NoError(t, models.RecordOutcomes(ctx, e.DB, j.ID, t2.ID, []models.PathOutcome{
			{Path: "/d/b", State: vocab.TaskSuccess, Code: "ok", Message: "done"},
			{Path: "/d/sub/c", State: vocab.TaskFailure, Code: "failed", Message: "again"}}))
		require.NoError(t, models.RecordOutcomes(ctx, e.DB, k.ID, tk.ID, []models.PathOutcome{{Path: "/d/a", State: vocab.TaskSuccess, Code: "ok", Message: "done"}}))

		var stats []models.JobStat
		require.NoError(t, e.DB.NewSelect().Model(&stats).Order("js.id").Scan(ctx))
		require.Len(t, stats, 5)
		id := map[string]int64{}
		for _, s := range stats {
			id[fmt.Sprintf("%d%s", s.JobID, s.Path)] = s.ID
		}
		sid := func(job *models.Job, path string) int64 { return id[fmt.Sprintf("%d%s", job.ID, path)] }
		ja, jb, jc, je, ka := sid(j, "/d/a"), sid(j, "/d/b"), sid(j, "/d/sub/c"), sid(j, "/dx/e"), sid(k, "/d/a")

		tests := []struct {
			query string
			want  []int64
		}{
			{"", []int64{ja, jb, jc, je, ka}},
			{fmt.Sprintf("job=%d", j.ID), []int64{ja, jb, jc, je}},
			{"state=FAILURE", []int64{jc}},
			{"state[]=SUCCESS&state[]=skipped", []int64{ja, jb, je, ka}},
			{"path=/d", []int64{ja, jb, jc, ka}}, // the path and below, not /dx
			{"path=/d/", []int64{ja, jb, jc, ka}},
			{"path=/d/sub", []int64{jc}},
			{"path=/d/a", []int64{ja, ka}},
			{"path=/", []int64{ja, jb, jc, je, ka}},
			{"path=/nowhere", []int64{}},
			{"history=false", []int64{ja, jb, jc, je, ka}},
			{fmt.Sprintf("job=%d&path=/d&state=SUCCESS", j.ID), []int64{ja, jb}},
		}
		for _, tc := range tests {
			r := e.AsAdmin(http.MethodGet, "/api/jobstats/?"+tc.query, nil)
			require.Equal(t, tc.want, resultIDs(t, r), tc.query)
		}
		r := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/?job=%d&path=/d/b", j.ID), nil)
		require.Equal(t, map[string]any{"id": float64(jb), "job": float64(j.ID), "task": float64(t2.ID), "path": "/d/b",
			"code": "ok", "message": "done", "state": "SUCCESS", "updated": r.Map()["results"].([]any)[0].(map[string]any)["updated"],
			"url": e.URL + fmt.Sprintf("/api/jobstats/%d/", jb)}, r.Map()["results"].([]any)[0])

		// history=true lists every outcome, oldest first.
		history := func(path string) []map[string]any {
			r := e.AsAdmin(http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			out := []map[string]any{}
			for _, x := range r.Map()["results"].([]any) {
				out = append(out, x.(map[string]any))
			}
			return out
		}
		require.Len(t, history("/api/jobstats/?history=true"), 7)
		require.Len(t, history(fmt.Sprintf("/api/jobstats/?history=1&job=%d", j.ID)), 6)
		require.Len(t, history("/api/jobstats/?history=true&state=FAILURE"), 3)
		require.Len(t, history("/api/jobstats/?history=true&path=/d/sub"), 2)
		hb := history(fmt.Sprintf("/api/jobstats/?history=true&job=%d&path=/d/b", j.ID))
		require.Len(t, hb, 2)
		require.Equal(t, "FAILURE", hb[0]["state"])
		require.Equal(t, "busy", hb[0]["message"])
		require.Equal(t, float64(t1.ID), hb[0]["task"])
		require.Equal(t, "SUCCESS", hb[1]["state"])
		require.Equal(t, float64(jb), hb[0]["jobstat"])
		require.Equal(t, e.URL+fmt.Sprintf("/api/jobstats/%d/", jb), hb[0]["url"])

		for q, field := range map[string]string{"state=nope": "state", "job=x": "job", "history=perhaps": "history"} {
			r := e.AsAdmin(http.MethodGet, "/api/jobstats/?"+q, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, q)
			require.Contains(t, r.Map(), field, q)
		}

		// Detail: no url.
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/%d/", jc), nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "/d/sub/c", r.Map()["path"])
		require.Equal(t, "again", r.Map()["message"])
		require.Equal(t, float64(t2.ID), r.Map()["task"])
		require.NotContains(t, r.Map(), "url")

		// A stat's history: its path in its job, with the same filters.
		hist := func(q string) []int64 {
			return resultIDs(t, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/%d/history/%s", jb, q), nil))
		}
		all := hist("")
		require.Len(t, all, 2)
		require.Less(t, all[0], all[1], "oldest first")
		require.Len(t, hist("?state=SUCCESS"), 1)
		require.Len(t, hist(fmt.Sprintf("?job=%d", j.ID)), 2)
		require.Empty(t, hist(fmt.Sprintf("?job=%d", k.ID)))
		require.Len(t, hist("?path=/d"), 2)
		require.Empty(t, hist("?path=/dx"))
		require.Len(t, resultIDs(t, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/%d/history/", ka), nil)), 1)
		require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/%d/history/?state=x", jb), nil).Status)

		for _, p := range []string{"/api/jobstats/999999/", "/api/jobstats/abc/", "/api/jobstats/999999/history/"} {
			require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, p, nil).Status, p)
		}

		// Pagination of the list.
		var many []models.PathOutcome
		for i := range 30 {
			many = append(many, models.PathOutcome{Path: fmt.Sprintf("/bulk/%02d", i), State: vocab.TaskSuccess, Code: "ok", Message: "done"})
		}
		tb := task(k, 2)
		require.NoError(t, models.RecordOutcomes(ctx, e.DB, k.ID, tb.ID, many))
		r = e.AsAdmin(http.MethodGet, "/api/jobstats/?path=/bulk&page=2", nil)
		require.Len(t, resultIDs(t, r), 10)
		require.Equal(t, float64(30), r.Map()["count"])
		require.Nil(t, r.Map()["next"])
		require.Contains(t, r.Map()["previous"], "path=%2Fbulk")
	})
}
