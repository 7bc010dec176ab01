package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// seedJob inserts j (site by name, created at the given time, in state)
// the way the engine would, without running anything.
func seedJob(t *testing.T, e *apitest.Env, j models.Job, state string, created time.Time) *models.Job {
	t.Helper()
	ctx := t.Context()
	site, err := models.EnsureSite(ctx, e.DB, j.Site)
	require.NoError(t, err)
	j.SiteID = site.ID
	if j.Queue == "" {
		j.Queue = vocab.DefaultQueue
	}
	if j.OwnerType == "" {
		j.OwnerType = models.OwnerSystem
	}
	j.Definition = models.JobDefinition{Name: j.Workflow, FilterRules: []models.FilterRule{}}
	require.NoError(t, models.CreateJob(ctx, e.DB, &j))
	_, err = e.DB.NewUpdate().Model((*models.Job)(nil)).Where("id = ?", j.ID).
		Set("state = ?", state).Set("created = ?", created.UTC()).Exec(ctx)
	require.NoError(t, err)
	j.State, j.Created = state, created.UTC()
	return &j
}

func ptr[T any](v T) *T { return &v }

// resultIDs returns the ids of a paginated answer's results, in order.
func resultIDs(t *testing.T, r apitest.Response) []int64 {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	return idsOf(t, r.Map()["results"])
}

func idsOf(t *testing.T, v any) []int64 {
	t.Helper()
	list, ok := v.([]any)
	require.True(t, ok, "not a list: %v", v)
	out := []int64{}
	for _, x := range list {
		out = append(out, int64(x.(map[string]any)["id"].(float64)))
	}
	return out
}

// jobFixture is five jobs that differ in every filtered column.
type jobFixture struct {
	now                time.Time
	j1, j2, j3, j4, j5 *models.Job
	alpha, fastQueue   int64
	taskOfJ1           int64
}

// Users' ids on jobs are plain numbers: no user row is needed.
const (
	aliceID = 501
	bobID   = 502
)

func seedJobFixture(t *testing.T, e *apitest.Env) *jobFixture {
	ctx := t.Context()
	now := time.Now().UTC()
	f := &jobFixture{now: now}
	f.j1 = seedJob(t, e, models.Job{Site: "alpha", Workflow: "migrate", OwnerType: models.OwnerUser, OwnerID: ptr[int64](aliceID),
		OwnerName: "alice", ClientKeyID: ptr[int64](7), ClientKeyName: "ci", Paths: []string{"/data/projects/a", "/home/x"},
		FriendlyName: "Nightly copy", NumFiles: 10, Completed: ptr(now.Add(-30 * time.Minute))}, vocab.JobSuccess, now.Add(-time.Hour))
	f.j2 = seedJob(t, e, models.Job{Site: "alpha", Workflow: "migrate", Queue: "fast", OwnerType: models.OwnerUser,
		OwnerID: ptr[int64](bobID), OwnerName: "bob", ScheduleID: ptr[int64](3), ScheduleName: "weekly",
		Paths: []string{"/data/other"}, NumFiles: 5, HasFailures: true, Completed: ptr(now.Add(-47 * time.Hour))},
		vocab.JobSuccess, now.Add(-48*time.Hour))
	f.j3 = seedJob(t, e, models.Job{Site: "beta", Workflow: "recall", Paths: []string{"/archive/50%_done"}, NumFiles: 3,
		Completed: ptr(now.Add(-10*24*time.Hour + time.Hour))}, vocab.JobFailure, now.Add(-10*24*time.Hour))
	f.j4 = seedJob(t, e, models.Job{Site: "beta", Workflow: "recall", Queue: "fast", OwnerType: models.OwnerUnknown,
		Paths: []string{"/Data/projects"}, Completed: ptr(now.Add(-40 * 24 * time.Hour))}, vocab.JobSuccess, now.Add(-40*24*time.Hour))
	f.j5 = seedJob(t, e, models.Job{Site: "alpha", Workflow: "scan", OwnerType: models.OwnerUser, OwnerID: ptr[int64](aliceID),
		OwnerName: "alice"}, vocab.JobStarted, now.Add(-5*time.Minute))
	f.alpha = f.j1.SiteID
	q := &models.Queue{SiteID: f.alpha, Name: "fast"}
	_, err := e.DB.NewInsert().Model(q).Exec(ctx)
	require.NoError(t, err)
	f.fastQueue = q.ID

	// j1 ran one task with ten outcomes.
	task := &models.Task{JobID: f.j1.ID, Site: "alpha", Queue: "default", TaskType: "copy", State: vocab.TaskFailure,
		TaskID: fmt.Sprintf("job-%d-r1-b0-r1-s0", f.j1.ID), NumPaths: 10, Started: ptr(now.Add(-time.Hour)),
		Completed: ptr(now.Add(-30 * time.Minute)), Result: map[string]any{"failed": 1}}
	require.NoError(t, models.CreateTask(ctx, e.DB, task))
	var outs []models.PathOutcome
	for i := range 10 {
		o := models.PathOutcome{Path: fmt.Sprintf("/data/projects/a/f%02d", i), State: vocab.TaskSuccess, Code: "ok", Message: "done",
			Size: int64(1000 * (i + 1))}
		switch i {
		case 8:
			o.State, o.Code = vocab.TaskFailure, "failed"
		case 9:
			o.State, o.Code = vocab.TaskSkipped, "skipped"
		}
		outs = append(outs, o)
	}
	require.NoError(t, models.RecordOutcomes(ctx, e.DB, f.j1.ID, task.ID, outs))
	f.taskOfJ1 = task.ID
	return f
}

func TestJobsList(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		f := seedJobFixture(t, e)
		j1, j2, j3, j4, j5 := f.j1.ID, f.j2.ID, f.j3.ID, f.j4.ID, f.j5.ID
		ts := func(d time.Duration) string { return url.QueryEscape(f.now.Add(d).Format(time.RFC3339Nano)) }
		day := func(d time.Duration) string { return f.now.Add(d).Format(time.DateOnly) }
		tests := []struct {
			query string
			want  []int64 // newest first
		}{
			{"", []int64{j5, j1, j2, j3, j4}},
			{"created=null", []int64{j5, j1, j2, j3, j4}},
			{"created=24h", []int64{j5, j1}},
			{"created=90m", []int64{j5, j1}},
			{"created=1h30m", []int64{j5, j1}},
			{"created=7d", []int64{j5, j1, j2}},
			{"created=2w", []int64{j5, j1, j2, j3}},
			{"created=30d", []int64{j5, j1, j2, j3}},
			{"created=24h&created_time_to=" + ts(-5*24*time.Hour), []int64{j5, j1}}, // created wins
			{"created_time_from=" + ts(-3*24*time.Hour), []int64{j5, j1, j2}},
			{"created_time_to=" + ts(-5*24*time.Hour), []int64{j3, j4}},
			{"created_time_from=" + ts(-11*24*time.Hour) + "&created_time_to=" + ts(-24*time.Hour), []int64{j2, j3}},
			{"created_time_from=" + day(-48*time.Hour), []int64{j5, j1, j2}},
			{"created_time_to=" + day(-10*24*time.Hour), []int64{j3, j4}}, // the whole day
			{"created_time_from=null", []int64{j5, j1, j2, j3, j4}},
			{"completed_time_from=" + ts(-3*24*time.Hour), []int64{j1, j2}},
			{"completed_time_to=" + ts(-5*24*time.Hour), []int64{j3, j4}},
			{"jobtype=migrate", []int64{j1, j2}},
			{"workflow=recall", []int64{j3, j4}},
			{"jobtype=migrate&workflow=recall", []int64{}},
			{"state=SUCCESS", []int64{j1, j2, j4}},
			{"state=success", []int64{j1, j2, j4}},
			{"state[]=FAILURE&state[]=STARTED", []int64{j5, j3}},
			{"state=FAILURE&state[]=STARTED", []int64{j5, j3}},
			{"state=HAS_FAILURES", []int64{j2}},
			{"state=HAS_FAILURES&state=FAILURE", []int64{j2, j3}},
			{"state=PENDING", []int64{}},
			{fmt.Sprintf("owner_ids[]=%d", aliceID), []int64{j5, j1}},
			{"owner_ids=-2", []int64{j3}},
			{"owner_ids[]=-1", []int64{j4}},
			{fmt.Sprintf("owner_ids[]=-1&owner_ids[]=%d", bobID), []int64{j2, j4}},
			{fmt.Sprintf("owner_ids=-2,%d", bobID), []int64{j2, j3}},
			{"clientkey_ids[]=7", []int64{j1}},
			{"clientkey_ids[]=8", []int64{}},
			{"schedule_ids[]=3&schedule_ids[]=4", []int64{j2}},
			{fmt.Sprintf("site_id=%d", f.alpha), []int64{j5, j1, j2}},
			{"site_id=999999", []int64{}},
			{"site=beta", []int64{j3, j4}},
			{"input_paths_prefix=/data", []int64{j1, j2}}, // case-sensitive: not /Data
			{"input_paths_prefix=/data/projects", []int64{j1}},
			{"input_paths_prefix=/home", []int64{j1}}, // any element
			{"input_paths_prefix=" + url.QueryEscape("/archive/50%"), []int64{j3}},
			{"input_paths_prefix=" + url.QueryEscape("/archive/5_%"), []int64{}}, // no wildcards
			{"search_keyword=ALI", []int64{j5, j1}},
			{"search_keyword=migr", []int64{j1, j2}},
			{"search_keyword=nightly", []int64{j1}},
			{"search_keyword=bet", []int64{j3, j4}},
			{"search_keyword=" + url.QueryEscape("%"), []int64{}},
			{"hide_noop=true", []int64{j5, j1, j2, j3}},
			{"hide_noop=false", []int64{j5, j1, j2, j3, j4}},
			{"queue=fast", []int64{j2, j4}},
			{fmt.Sprintf("queue_id=%d", f.fastQueue), []int64{j2}}, // the name within its site
			{"queue_id=999999", []int64{}},
			{fmt.Sprintf("site=alpha&state=SUCCESS&owner_ids=%d", aliceID), []int64{j1}},
			{"created=30d&hide_noop=true&search_keyword=a&state=SUCCESS&state=FAILURE", []int64{j1, j2, j3}},
		}
		for _, tc := range tests {
			r := e.AsAdmin(http.MethodGet, "/api/jobs/?"+tc.query, nil)
			require.Equal(t, tc.want, resultIDs(t, r), tc.query)
			require.Equal(t, float64(len(tc.want)), r.Map()["count"], tc.query)
		}

		// Every job is rendered like the detail.
		r := e.AsAdmin(http.MethodGet, "/api/jobs/?jobtype=migrate", nil)
		first := r.Map()["results"].([]any)[0].(map[string]any)
		require.Equal(t, "migrate", first["workflow"])
		require.Equal(t, map[string]any{"type": "user", "id": float64(aliceID), "name": "alice"}, first["owner"])
		require.Equal(t, "ci", first["clientkey"])

		// owners: the distinct owners of the matching jobs.
		owners := func(q string) any {
			r := e.AsAdmin(http.MethodGet, "/api/jobs/?"+q, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			return r.Map()["owners"]
		}
		alice := map[string]any{"type": "user", "id": float64(aliceID), "name": "alice"}
		bob := map[string]any{"type": "user", "id": float64(bobID), "name": "bob"}
		system := map[string]any{"type": "system", "id": float64(-2), "name": "System"}
		unknown := map[string]any{"type": "unknown", "id": float64(-1), "name": "Unknown"}
		require.Equal(t, []any{alice, bob, system, unknown}, owners(""))
		require.Equal(t, []any{alice, bob}, owners("site=alpha"))
		require.Equal(t, []any{system, unknown}, owners("site=beta"))
		require.Equal(t, []any{}, owners("state=PAUSED"))

		// Bad filters are 400s naming the field.
		for q, field := range map[string]string{
			"created=soon": "created", "created=-1h": "created", "created=0d": "created", "created=99999w": "created",
			"created_time_from=yesterday": "created_time_from", "created_time_to=2024-13-01": "created_time_to",
			"completed_time_from=x": "completed_time_from", "completed_time_to=1": "completed_time_to",
			"state=BOGUS": "state", "state[]=SUCCESS&state[]=nope": "state",
			"owner_ids=alice": "owner_ids", "owner_ids[]=1.5": "owner_ids", "clientkey_ids[]=x": "clientkey_ids",
			"schedule_ids=x": "schedule_ids", "site_id=alpha": "site_id", "queue_id=fast": "queue_id",
			"hide_noop=maybe": "hide_noop",
		} {
			r := e.AsAdmin(http.MethodGet, "/api/jobs/?"+q, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, q)
			require.Contains(t, r.Map(), field, q)
			r = e.AsAdmin(http.MethodGet, "/api/jobs/stats/?"+q, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, q)
			require.Contains(t, r.Map(), field, q)
		}
		// An unencoded + of an offset arrives as a space and is still read.
		r = e.AsAdmin(http.MethodGet, "/api/jobs/?created_time_from="+f.now.Add(-3*24*time.Hour).Format("2006-01-02T15:04:05")+"+00:00", nil)
		require.Equal(t, []int64{j5, j1, j2}, resultIDs(t, r))

		// Pagination keeps the filters and the owners on every page.
		var bulk []int64 // newest first
		for i := range 25 {
			j := seedJob(t, e, models.Job{Site: "gamma", Workflow: "bulk"}, vocab.JobSuccess, f.now.Add(-time.Duration(i)*time.Second))
			bulk = append(bulk, j.ID)
		}
		r = e.AsAdmin(http.MethodGet, "/api/jobs/?workflow=bulk", nil)
		page1 := resultIDs(t, r)
		require.Len(t, page1, 20)
		require.Equal(t, float64(25), r.Map()["count"])
		require.Equal(t, []any{system}, r.Map()["owners"])
		require.Nil(t, r.Map()["previous"])
		next := r.Map()["next"].(string)
		require.Contains(t, next, "workflow=bulk")
		require.Contains(t, next, "page=2")
		r = e.AsAdmin(http.MethodGet, "/api/jobs/?workflow=bulk&page=2", nil)
		page2 := resultIDs(t, r)
		require.Len(t, page2, 5)
		require.Nil(t, r.Map()["next"])
		require.NotNil(t, r.Map()["previous"])
		require.Equal(t, []any{system}, r.Map()["owners"])
		require.Equal(t, bulk, append(page1, page2...), "newest first across pages")
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/jobs/?workflow=bulk&page=3", nil).Status)
		r = e.AsAdmin(http.MethodGet, "/api/jobs/?workflow=bulk&page_size=0", nil)
		require.Len(t, resultIDs(t, r), 25)
	})
}

func TestJobsStatsRecentChoices(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		f := seedJobFixture(t, e)

		zeros := map[string]any{}
		for _, s := range models.JobStates {
			zeros[s] = float64(0)
		}
		byState := func(kv ...any) map[string]any {
			out := map[string]any{}
			for k, v := range zeros {
				out[k] = v
			}
			for i := 0; i < len(kv); i += 2 {
				out[kv[i].(string)] = float64(kv[i+1].(int))
			}
			return out
		}
		r := e.AsAdmin(http.MethodGet, "/api/jobs/stats/", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, map[string]any{
			"count": float64(5), "by_state": byState("SUCCESS", 3, "FAILURE", 1, "STARTED", 1), "has_failures": float64(1),
			"files": map[string]any{"numfiles": float64(18), "numprocessedfiles": float64(8), "numfailedfiles": float64(1),
				"numskippedfiles": float64(1), "numabortedfiles": float64(0), "numcancelledfiles": float64(0)},
		}, r.Map())
		r = e.AsAdmin(http.MethodGet, "/api/jobs/stats/?site=alpha&hide_noop=true&state=SUCCESS", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(2), r.Map()["count"])
		require.Equal(t, byState("SUCCESS", 2), r.Map()["by_state"])
		require.Equal(t, float64(15), r.Map()["files"].(map[string]any)["numfiles"])
		r = e.AsAdmin(http.MethodGet, "/api/jobs/stats/?state=HAS_FAILURES", nil)
		require.Equal(t, float64(1), r.Map()["count"])
		require.Equal(t, float64(1), r.Map()["has_failures"])
		r = e.AsAdmin(http.MethodGet, "/api/jobs/stats/?workflow=none", nil)
		require.Equal(t, float64(0), r.Map()["count"])
		require.Equal(t, byState(), r.Map()["by_state"])

		// recent: a bare array, newest first, 5 by default.
		recent := func(q string) []int64 {
			r := e.AsAdmin(http.MethodGet, "/api/jobs/recent/"+q, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			return idsOf(t, r.JSON())
		}
		all := []int64{f.j5.ID, f.j1.ID, f.j2.ID, f.j3.ID, f.j4.ID}
		for range 3 {
			seedJob(t, e, models.Job{Site: "alpha", Workflow: "old"}, vocab.JobSuccess, f.now.Add(-100*24*time.Hour))
		}
		require.Equal(t, all, recent(""))
		require.Equal(t, all[:2], recent("?n=2"))
		require.Equal(t, all[:3], recent("?limit=3"))
		require.Len(t, recent("?n=500"), 8)
		require.Equal(t, []int64{f.j3.ID, f.j4.ID}, recent("?site=beta"))
		for _, q := range []string{"?n=0", "?n=x", "?limit=-1", "?state=nope"} {
			require.Equal(t, http.StatusBadRequest, e.AsAdmin(http.MethodGet, "/api/jobs/recent/"+q, nil).Status, q)
		}

		// jobtype_choices: every workflow definition, paginated.
		n, err := e.DB.NewSelect().Model((*models.Workflow)(nil)).Count(t.Context())
		require.NoError(t, err)
		r = e.AsAdmin(http.MethodGet, "/api/jobs/jobtype_choices/?page_size=0", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(n), r.Map()["count"])
		require.NotZero(t, n)
		for _, c := range r.Map()["results"].([]any) {
			require.ElementsMatch(t, []string{"name", "label"}, keys(c.(map[string]any)))
		}

		// The static paths coexist with /jobs/{id}/.
		r = e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/%d/", f.j1.ID), nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, float64(f.j1.ID), r.Map()["id"])
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/jobs/999999/", nil).Status)
		require.Equal(t, http.StatusNotFound, e.AsAdmin(http.MethodGet, "/api/jobs/recentx/", nil).Status)
	})
}

func keys(m map[string]any) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestJobsProgressStatisticsFiles(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		f := seedJobFixture(t, e)
		get := func(path string) apitest.Response { return e.AsAdmin(http.MethodGet, path, nil) }

		r := get(fmt.Sprintf("/api/jobs/%d/progress/", f.j1.ID))
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, map[string]any{"id": float64(f.j1.ID), "state": "SUCCESS", "progress": float64(100),
			"numfiles": float64(10), "numprocessedfiles": float64(8), "numfailedfiles": float64(1), "numskippedfiles": float64(1),
			"numabortedfiles": float64(0), "numcancelledfiles": float64(0), "dir_walk_complete": false, "live": nil}, r.Map())

		// A running job without a workflow: no live answer, no error.
		p5 := fmt.Sprintf("/api/jobs/%d/progress/", f.j5.ID)
		r = get(p5)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(0), r.Map()["progress"])
		require.Nil(t, r.Map()["live"])

		// A running workflow answers the progress query under live.
		w := sdkworker.New(e.Temporal, "progress-test", sdkworker.Options{})
		w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
			if err := workflow.SetQueryHandler(ctx, workflows.ProgressQuery, func() (workflows.JobProgress, error) {
				return workflows.JobProgress{JobID: f.j5.ID, State: "STARTED", Batches: 4, BatchesDone: 1, InFlight: 2}, nil
			}); err != nil {
				return err
			}
			workflow.GetSignalChannel(ctx, "stop").Receive(ctx, nil)
			return nil
		}, workflow.RegisterOptions{Name: "FakeJobProgress"})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		_, err := e.Temporal.ExecuteWorkflow(t.Context(), sdkclient.StartWorkflowOptions{
			ID: workflows.JobWorkflowID(f.j5.ID), TaskQueue: "progress-test"}, "FakeJobProgress")
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = e.Temporal.TerminateWorkflow(context.Background(), workflows.JobWorkflowID(f.j5.ID), "", "test over")
		})
		require.Eventually(t, func() bool { return get(p5).Map()["live"] != nil }, 20*time.Second, 100*time.Millisecond)
		require.Equal(t, map[string]any{"job_id": float64(f.j5.ID), "state": "STARTED", "batches": float64(4),
			"batches_done": float64(1), "in_flight": float64(2), "paused": false, "steps": []any{}, "files_done": float64(0),
			"bytes_done": float64(0), "files_unrecorded": float64(0)}, get(p5).Map()["live"])

		r = get(fmt.Sprintf("/api/jobs/%d/statistics/", f.j1.ID))
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, map[string]any{"id": float64(f.j1.ID), "state": "SUCCESS",
			"files": map[string]any{"total": float64(10),
				"by_state":       map[string]any{"SUCCESS": float64(8), "FAILURE": float64(1), "SKIPPED": float64(1)},
				"by_code":        map[string]any{"ok": float64(8), "failed": float64(1), "skipped": float64(1)},
				"bytes_by_state": map[string]any{"SUCCESS": float64(36000), "FAILURE": float64(9000), "SKIPPED": float64(10000)}},
			"bytes": float64(55000),
			"tasks": map[string]any{"total": float64(1), "by_state": map[string]any{"FAILURE": float64(1)},
				"by_type": map[string]any{"copy": float64(1)}},
		}, r.Map())
		r = get(fmt.Sprintf("/api/jobs/%d/statistics/", f.j3.ID))
		require.Equal(t, float64(0), r.Map()["files"].(map[string]any)["total"])

		files := func(q string) apitest.Response { return get(fmt.Sprintf("/api/jobs/%d/files/%s", f.j1.ID, q)) }
		r = files("")
		require.Len(t, resultIDs(t, r), 10)
		row := r.Map()["results"].([]any)[0].(map[string]any)
		require.Equal(t, "/data/projects/a/f00", row["path"])
		require.Equal(t, float64(f.taskOfJ1), row["task"])
		require.Equal(t, float64(f.j1.ID), row["job"])
		require.Contains(t, row["url"], fmt.Sprintf("/api/jobstats/%d/", int64(row["id"].(float64))))
		for q, n := range map[string]int{"?category=success": 8, "?category=FAILURE": 1, "?category=skipped": 1,
			"?category=cancelled": 0, "?category=aborted": 0} {
			require.Len(t, resultIDs(t, files(q)), n, q)
		}
		require.Equal(t, http.StatusBadRequest, files("?category=done").Status)
		require.Contains(t, files("?category=done").Map(), "category")

		for _, p := range []string{"progress", "statistics", "files"} {
			require.Equal(t, http.StatusNotFound, get("/api/jobs/999999/"+p+"/").Status, p)
			require.Equal(t, http.StatusNotFound, get("/api/jobs/abc/"+p+"/").Status, p)
		}
	})
}

// TestJobsReadPermissions: the Users group reads jobs, tasks and stats; a
// group without permissions reads none of them.
func TestJobsReadPermissions(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		f := seedJobFixture(t, e)
		r := e.AsAdmin(http.MethodPost, "/api/groups/", map[string]any{"name": "Auditors"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		user := apitest.Bearer(e.CreateUser("x"))
		auditor := apitest.Bearer(e.CreateUser("y", "Auditors"))
		var statID int64
		require.NoError(t, e.DB.NewSelect().Model((*models.JobStat)(nil)).Column("id").Limit(1).Scan(t.Context(), &statID))
		for _, p := range []string{"/api/jobs/", "/api/jobs/stats/", "/api/jobs/recent/", "/api/jobs/jobtype_choices/",
			fmt.Sprintf("/api/jobs/%d/progress/", f.j1.ID), fmt.Sprintf("/api/jobs/%d/statistics/", f.j1.ID),
			fmt.Sprintf("/api/jobs/%d/files/", f.j1.ID),
			"/api/tasks/", fmt.Sprintf("/api/tasks/%d/", f.taskOfJ1), fmt.Sprintf("/api/tasks/%d/files/", f.taskOfJ1),
			"/api/jobstats/", fmt.Sprintf("/api/jobstats/%d/", statID), fmt.Sprintf("/api/jobstats/%d/history/", statID),
		} {
			require.Equal(t, http.StatusOK, e.Do(http.MethodGet, p, user, nil).Status, p)
			require.Equal(t, http.StatusForbidden, e.Do(http.MethodGet, p, auditor, nil).Status, p)
			require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, p, "", nil).Status, p)
		}
	})
}
