package hub_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestListsShowEveryChange: the jobs, tasks and job stats lists keep each row they
// rendered under the row's version, and whatever changes a row (the
// models, a raw UPDATE of any column, a delete, an insert), each page of
// the list is then what the list read and rendered anew shows. A row is
// rendered again for another host (its links), and a running job's
// runtime moves with the clock.
func TestListsShowEveryChange(t *testing.T) {
	for _, kind := range dbtest.Dialects(t) {
		t.Run(kind, func(t *testing.T) {
			e := apitest.New(t, kind)
			ctx := t.Context()
			site, err := models.EnsureSite(ctx, e.DB, "east")
			require.NoError(t, err)
			seedJobs(t, e.DB, kind, site, 45, 1, 1) // one task each; three pages of 20, the last read from the end
			h := e.API.Handler()
			get := func(host, path string) string {
				t.Helper()
				return getAs(t, h, host, e.Admin, path)
			}
			results := func(path string) []string {
				t.Helper()
				var page struct{ Results []json.RawMessage }
				require.NoError(t, json.Unmarshal([]byte(get("hub.test", path)), &page))
				var out []string
				for _, r := range page.Results {
					out = append(out, string(r))
				}
				return out
			}
			// same: the pages of 20 of each list, as kept, are the list
			// rendered whole (page_size=0: read and rendered anew at each
			// request), row for row.
			var lists []string
			same := func() {
				t.Helper()
				for _, list := range lists {
					var pages []string
					for p := 1; p <= 3; p++ {
						pages = append(pages, results(fmt.Sprintf("%spage_size=20&page=%d", list, p))...)
					}
					require.Equal(t, results(list+"page_size=0"), pages, list)
				}
			}
			var jobs []models.Job // newest first
			require.NoError(t, models.JobsQuery(e.DB, &jobs, models.JobFilter{}).Scan(ctx))
			var tasks []models.TaskRow
			require.NoError(t, models.TasksQuery(e.DB, &tasks, models.TaskFilter{}).Scan(ctx))
			// 45 stats of the newest job, recorded by its task.
			var outs []models.PathOutcome
			for i := range 45 {
				outs = append(outs, models.PathOutcome{Path: fmt.Sprintf("/data/f%02d", i), State: vocab.TaskSuccess, Code: "ok", Size: int64(i)})
			}
			var task models.Task
			require.NoError(t, e.DB.NewSelect().Model(&task).Where("job_id = ?", jobs[0].ID).Limit(1).Scan(ctx))
			require.NoError(t, models.RecordOutcomes(ctx, e.DB, jobs[0].ID, task.ID, outs))
			stats := fmt.Sprintf("/api/jobstats/?job=%d&", jobs[0].ID)
			lists = []string{"/api/jobs/?", "/api/jobs/?state=SUCCESS&", "/api/tasks/?", "/api/tasks/?state=SUCCESS&", stats, stats + "state=SUCCESS&"}
			exec := func(query string, args ...any) {
				t.Helper()
				execSQL(t, e.DB, query, args...)
			}
			same()
			same() // now from what they kept

			require.NoError(t, models.UpdateJob(ctx, e.DB, jobs[0].ID, models.JobUpdate{State: vocab.JobPaused}))
			require.NoError(t, models.FinishTask(ctx, e.DB, tasks[0].ID, vocab.TaskFailure, map[string]any{"error": "broke"}))
			same()
			exec("UPDATE jobs SET friendly_name = 'renamed', numfiles = 7 WHERE id = ?", jobs[14].ID)
			exec("UPDATE jobs SET error = 'broke', state = 'FAILURE' WHERE id = ?", jobs[42].ID)
			exec("UPDATE tasks SET queue = 'slow' WHERE id = ?", tasks[30].ID)
			exec("UPDATE tasks SET started = ? WHERE id = ?", time.Now().UTC(), tasks[44].ID)
			require.NoError(t, models.RecordOutcomes(ctx, e.DB, jobs[0].ID, task.ID, []models.PathOutcome{ // recorded again
				{Path: "/data/f03", State: vocab.TaskFailure, Code: "io"}, {Path: "/data/f40", State: vocab.TaskSuccess, Code: "again"}}))
			exec("UPDATE job_stats SET message = 'edited' WHERE job_id = ? AND path = '/data/f25'", jobs[0].ID)
			same()
			exec("DELETE FROM job_stats WHERE job_id = ? AND path IN ('/data/f01', '/data/f30')", jobs[0].ID)
			exec(`INSERT INTO job_stats (job_id, task_id, path, state, code, message, updated) VALUES (?, ?, '/data/late', 'SUCCESS', 'ok', '', ?)`,
				jobs[0].ID, task.ID, time.Now().UTC())
			require.NoError(t, models.RefreshJobCounts(ctx, e.DB, jobs[0].ID)) // the number of its stats, which the list's pages use
			same()
			exec("DELETE FROM jobs WHERE id IN (?, ?)", jobs[4].ID, jobs[34].ID) // and their tasks
			same()
			seedJob(t, e, models.Job{Workflow: "recall", Site: "east", Paths: []string{"/data/new"}}, vocab.JobSuccess, time.Now())
			seedJob(t, e, models.Job{Workflow: "recall", Site: "east", Paths: []string{"/data/old"}}, vocab.JobSuccess, time.Now().Add(-24*time.Hour))
			exec(`INSERT INTO tasks (job_id, site, queue, tasktype, task_id, state, created, run)
				SELECT id, site, 'default', 'recall', 'job-' || id || '-r1-b0-r1-s0', 'SUCCESS', created, 1 FROM jobs WHERE workflow = 'recall'`)
			same()

			other := get("other.test", "/api/jobs/?page_size=20")
			require.Contains(t, other, `"url":"http://other.test/api/jobs/`)
			require.NotContains(t, other, "hub.test", "links name the host asked")
			other = get("other.test", "/api/tasks/?page_size=20")
			require.Contains(t, other, `"url":"http://other.test/api/tasks/`)
			require.NotContains(t, other, "hub.test", "links name the host asked")
			other = get("other.test", stats+"page_size=20")
			require.Contains(t, other, `"url":"http://other.test/api/jobstats/`)
			require.NotContains(t, other, "hub.test", "links name the host asked")

			exec("UPDATE jobs SET state = 'STARTED', started = ?, completed = NULL WHERE id = ?", time.Now().UTC().Add(-time.Hour), jobs[0].ID)
			first := get("hub.test", "/api/jobs/?page_size=20&state=STARTED")
			time.Sleep(20 * time.Millisecond)
			require.NotEqual(t, first, get("hub.test", "/api/jobs/?page_size=20&state=STARTED"), "a running job's runtime moves")
		})
	}
}

// getAs is the body of h's 200 answer to GET path at host, asked with
// token.
func getAs(t *testing.T, h http.Handler, host, token, path string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
	req.Header.Set("Authorization", apitest.Bearer(token))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	body, err := io.ReadAll(w.Result().Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, w.Code, string(body))
	return string(body)
}

// execSQL runs a statement on db, as any other writer could.
func execSQL(t *testing.T, db bun.IDB, query string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(t.Context(), query, args...)
	require.NoError(t, err)
}
