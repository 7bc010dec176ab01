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

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// TestJobsListShowsEveryChange: the jobs list keeps each job it rendered
// under the job's row version, and whatever changes a job (the models, a
// raw UPDATE of any column, a delete, an insert), each page of the list
// is then what the list read and rendered anew shows. A job is
// rendered again for another host (its links), and a running job's
// runtime moves with the clock.
func TestJobsListShowsEveryChange(t *testing.T) {
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := t.Context()
		at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		var jobs []*models.Job
		for i := range 45 { // three pages of 20: the last read from the list's end
			jobs = append(jobs, seedJob(t, e, models.Job{Workflow: "premigrate", Site: "east", Paths: []string{"/data"}},
				vocab.JobSuccess, at.Add(time.Duration(i)*time.Second)))
		}
		get := func(h http.Handler, host, path string) string {
			t.Helper()
			req := httptest.NewRequest(http.MethodGet, e.URL+path, nil)
			req.Host = host
			req.Header.Set("Authorization", apitest.Bearer(e.Admin))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			body, err := io.ReadAll(w.Result().Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, w.Code, string(body))
			return string(body)
		}
		h := e.API.Handler()
		results := func(path string) []string {
			t.Helper()
			var page struct{ Results []json.RawMessage }
			require.NoError(t, json.Unmarshal([]byte(get(h, "hub.test", path)), &page))
			var out []string
			for _, r := range page.Results {
				out = append(out, string(r))
			}
			return out
		}
		// same: the pages of 20 (the last read from the list's end), as
		// kept, are the list rendered whole (page_size=0, read and
		// rendered anew at each request), row for row.
		same := func() {
			t.Helper()
			for _, filter := range []string{"", "&state=SUCCESS"} {
				var pages []string
				for p := 1; p <= 3; p++ {
					pages = append(pages, results(fmt.Sprintf("/api/jobs/?page_size=20&page=%d%s", p, filter))...)
				}
				require.Equal(t, results("/api/jobs/?page_size=0"+filter), pages, filter)
			}
		}
		same()
		same() // now from what it kept

		require.NoError(t, models.UpdateJob(ctx, e.DB, jobs[44].ID, models.JobUpdate{State: vocab.JobPaused}))
		same()
		_, err := e.DB.ExecContext(ctx, "UPDATE jobs SET friendly_name = 'renamed', numfiles = 7 WHERE id = ?", jobs[30].ID)
		require.NoError(t, err)
		_, err = e.DB.ExecContext(ctx, "UPDATE jobs SET error = 'broke', state = 'FAILURE' WHERE id = ?", jobs[2].ID)
		require.NoError(t, err)
		same()
		_, err = e.DB.ExecContext(ctx, "DELETE FROM jobs WHERE id IN (?, ?)", jobs[10].ID, jobs[40].ID)
		require.NoError(t, err)
		same()
		seedJob(t, e, models.Job{Workflow: "recall", Site: "east", Paths: []string{"/data/new"}}, vocab.JobSuccess, at.Add(time.Minute))
		seedJob(t, e, models.Job{Workflow: "recall", Site: "east", Paths: []string{"/data/old"}}, vocab.JobSuccess, at.Add(-time.Minute))
		same()

		other := get(h, "other.test", "/api/jobs/?page_size=20")
		require.Contains(t, other, `"url":"http://other.test/api/jobs/`)
		require.NotContains(t, other, "hub.test", "links name the host asked")

		_, err = e.DB.ExecContext(ctx, "UPDATE jobs SET state = 'STARTED', started = ? WHERE id = ?", at, jobs[44].ID)
		require.NoError(t, err)
		first := get(h, "hub.test", "/api/jobs/?page_size=20&state=STARTED")
		time.Sleep(20 * time.Millisecond)
		second := get(h, "hub.test", "/api/jobs/?page_size=20&state=STARTED")
		require.NotEqual(t, first, second, "a running job's runtime moves")
	})
}
