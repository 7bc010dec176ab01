package hub_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// TestKeptPagesShowEveryChange: the jobs and tasks lists keep whole pages
// under the generations of sites and jobs (on PostgreSQL the read's
// snapshot), the job stats list on PostgreSQL under the snapshot, and
// whatever changes what a page shows (a job, a task or a job stat edited,
// deleted or inserted with plain SQL, a site renamed, which the site
// filter follows, a queue renamed, which the queue_id filter reads),
// every page is what a server that kept nothing answers; so are the
// owners the jobs list names after a job's owner changes. A page filtered
// by a period before now is never kept: time alone moves it.
func TestKeptPagesShowEveryChange(t *testing.T) {
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		kind := "sqlite"
		if models.IsPostgres(e.DB) {
			kind = "postgres"
		}
		site, err := models.EnsureSite(ctx, e.DB, "east")
		require.NoError(t, err)
		seedJobs(t, e.DB, kind, site, 45, 45, 1) // 45 stats of the newest job
		exec := func(query string, args ...any) {
			t.Helper()
			execSQL(t, e.DB, query, args...)
		}
		exec("INSERT INTO queues (site_id, name, label) VALUES (?, 'default', 'Default')", site.ID)
		var queue int64
		require.NoError(t, e.DB.NewSelect().Table("queues").Column("id").Where("site_id = ?", site.ID).Scan(ctx, &queue))
		var jobs []models.Job // newest first
		require.NoError(t, models.JobsQuery(e.DB, &jobs, models.JobFilter{}).Scan(ctx))

		kept := e.API.Handler()
		paths := []string{"/api/jobs/", "/api/jobs/?page=2", "/api/jobs/?page_size=21&page=2", "/api/jobs/?site=west",
			fmt.Sprintf("/api/jobs/?queue_id=%d", queue), "/api/jobs/?state=FAILURE", "/api/tasks/", "/api/tasks/?page=3",
			fmt.Sprintf("/api/tasks/?job_id=%d", jobs[3].ID)}
		for _, q := range []string{"", "&page=2", "&state=FAILURE", "&path=/data/d7/f7", "&history=true"} {
			paths = append(paths, fmt.Sprintf("/api/jobstats/?job=%d%s", jobs[0].ID, q))
		}
		same := func() {
			t.Helper()
			for _, host := range []string{"hub.test", "other.test"} {
				for _, p := range paths {
					require.Equal(t, getAs(t, freshServer(e), host, e.Admin, p), getAs(t, kept, host, e.Admin, p), "%s%s", host, p)
				}
			}
		}
		same()
		same() // now from what it kept
		exec("UPDATE jobs SET friendly_name = 'renamed', numfiles = 7 WHERE id = ?", jobs[2].ID)
		same()
		exec("UPDATE jobs SET state = 'FAILURE', error = 'broke' WHERE id = ?", jobs[30].ID)
		same()
		exec("UPDATE tasks SET queue = 'slow' WHERE job_id = ?", jobs[3].ID)
		same()
		exec("UPDATE job_stats SET message = 'edited', state = 'FAILURE' WHERE job_id = ? AND path IN ('/data/d7/f7', '/data/d30/f30')", jobs[0].ID)
		exec("DELETE FROM job_stats WHERE job_id = ? AND path = '/data/d3/f3'", jobs[0].ID)
		require.NoError(t, models.RefreshJobCounts(ctx, e.DB, jobs[0].ID))
		same()
		exec("UPDATE sites SET name = 'west' WHERE id = ?", site.ID) // ?site=west: every job, by the site's name now
		same()
		exec("UPDATE queues SET name = 'other' WHERE id = ?", queue) // ?queue_id: no job's queue is called so now
		same()
		exec("DELETE FROM jobs WHERE id = ?", jobs[10].ID) // and its task
		same()
		seedJob(t, e, models.Job{Workflow: "recall", Site: "west", Paths: []string{"/data/new"}}, vocab.JobSuccess, time.Now())
		exec(`INSERT INTO tasks (job_id, site, queue, tasktype, task_id, state, created, run)
			SELECT id, site, 'default', 'recall', 'job-' || id || '-r1-b0-r1-s0', 'SUCCESS', created, 1 FROM jobs WHERE workflow = 'recall'`)
		same()
		require.Contains(t, getAs(t, kept, "hub.test", e.Admin, "/api/jobs/?site=west"), `"count":45`)
		require.Contains(t, getAs(t, kept, "hub.test", e.Admin, fmt.Sprintf("/api/jobs/?queue_id=%d", queue)), `"count":0`)
		// The owners the jobs list names: a job of a new user, a job
		// given to another user, that user's name changed, their only
		// job deleted.
		seedJob(t, e, models.Job{Workflow: "recall", Site: "west", Paths: []string{"/data/b"}, OwnerType: models.OwnerUser,
			OwnerID: ptr(int64(43)), OwnerName: "bob"}, vocab.JobSuccess, time.Now())
		same()
		exec("UPDATE jobs SET owner_type = 'user', owner_id = 42, owner_name = 'ann' WHERE id = ?", jobs[5].ID)
		same()
		exec("UPDATE jobs SET owner_name = 'anne' WHERE id = ?", jobs[5].ID)
		same()
		exec("DELETE FROM jobs WHERE id = ?", jobs[5].ID)
		same()

		// A period before now: the job created a moment ago leaves the
		// page when the period has passed, though nothing was written.
		recent := func() int {
			var page struct{ Count int }
			require.NoError(t, json.Unmarshal([]byte(getAs(t, kept, "hub.test", e.Admin, "/api/jobs/?created=1s")), &page))
			return page.Count
		}
		time.Sleep(1100 * time.Millisecond) // the jobs above are older than that
		seedJob(t, e, models.Job{Workflow: "recall", Site: "west", Paths: []string{"/data/newer"}}, vocab.JobSuccess, time.Now())
		require.Equal(t, 1, recent())
		require.Equal(t, 1, recent())
		time.Sleep(1100 * time.Millisecond)
		require.Zero(t, recent())
	})
}

// TestKeptPagesAreNeverOlderThanACommit: the jobs list while a job's
// number of files moves, and while its owner's name does, the tasks list while a task's queue does, the
// job stats list while a stat's message does (neverOlderThanACommit).
func TestKeptPagesAreNeverOlderThanACommit(t *testing.T) {
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		j := seedJob(t, e, models.Job{Workflow: "recall", Site: "east", Paths: []string{"/data/f"}}, vocab.JobSuccess, time.Now())
		neverOlderThanACommit(t, e, "/api/jobs/", fmt.Sprintf("UPDATE jobs SET numfiles = ? WHERE id = %d", j.ID),
			func(body []byte) (int64, error) {
				var page struct{ Results []struct{ NumFiles int64 } }
				if err := json.Unmarshal(body, &page); err != nil || len(page.Results) != 1 {
					return 0, fmt.Errorf("%s (%v)", body, err)
				}
				return page.Results[0].NumFiles, nil
			})
		neverOlderThanACommit(t, e, "/api/jobs/",
			fmt.Sprintf("UPDATE jobs SET owner_type = 'user', owner_id = 7, owner_name = CAST(? AS TEXT) WHERE id = %d", j.ID),
			func(body []byte) (int64, error) {
				var page struct{ Owners []struct{ Name string } }
				if err := json.Unmarshal(body, &page); err != nil || len(page.Owners) != 1 {
					return 0, fmt.Errorf("%s (%v)", body, err)
				}
				if page.Owners[0].Name == "System" { // before the first write
					return 0, nil
				}
				return strconv.ParseInt(page.Owners[0].Name, 10, 64)
			})
		execSQL(t, e.DB, `INSERT INTO tasks (job_id, site, queue, tasktype, task_id, state, created, run)
			VALUES (?, 'east', 'q0', 'recall', 'job-1-r1-b0-r1-s0', 'SUCCESS', ?, 1)`, j.ID, time.Now().UTC())
		neverOlderThanACommit(t, e, "/api/tasks/", "UPDATE tasks SET queue = 'q' || CAST(? AS TEXT)",
			func(body []byte) (int64, error) {
				var page struct{ Results []struct{ Queue string } }
				if err := json.Unmarshal(body, &page); err != nil || len(page.Results) != 1 {
					return 0, fmt.Errorf("%s (%v)", body, err)
				}
				return strconv.ParseInt(strings.TrimPrefix(page.Results[0].Queue, "q"), 10, 64)
			})
		execSQL(t, e.DB, `INSERT INTO job_stats (job_id, path, state, code, message, updated) VALUES (?, '/data/f', 'SUCCESS', 'ok', '0', ?)`,
			j.ID, time.Now().UTC())
		require.NoError(t, models.RefreshJobCounts(t.Context(), e.DB, j.ID))
		neverOlderThanACommit(t, e, fmt.Sprintf("/api/jobstats/?job=%d", j.ID), "UPDATE job_stats SET message = CAST(? AS TEXT)",
			func(body []byte) (int64, error) {
				var page struct{ Results []struct{ Message string } }
				if err := json.Unmarshal(body, &page); err != nil || len(page.Results) != 1 {
					return 0, fmt.Errorf("%s (%v)", body, err)
				}
				return strconv.ParseInt(page.Results[0].Message, 10, 64)
			})
	})
}
