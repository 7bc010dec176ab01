package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// TestCountedListsReadDeepPagesFromTheEnd walks every page of the lists
// whose total is known before their page is read (all jobs, all tasks and
// all of a job's stats, whose numbers the database keeps, and jobs, tasks
// and a job's stats of one state), whose pages past the middle are read
// from the list's end, and checks that the pages put together are the
// whole list in its order, with ties of the order's first column among
// the rows, for a page size that divides the list and one that does not.
func TestCountedListsReadDeepPagesFromTheEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range dbtest.Dialects(t) {
		t.Run(kind, func(t *testing.T) { walkCountedLists(t, apitest.New(t, kind), kind) })
	}
}

func walkCountedLists(t *testing.T, e *apitest.Env, kind string) {
	ctx := context.Background()
	site, err := models.EnsureSite(ctx, e.DB, "pages")
	require.NoError(t, err)
	seedJobs(t, e.DB, kind, site, 140, 100, 1)
	for _, table := range []string{"jobs", "tasks"} { // a third share one creation time, a quarter failed
		_, err := e.DB.ExecContext(ctx, "UPDATE "+table+" SET created = (SELECT MIN(created) FROM "+table+") WHERE id % 3 = 0")
		require.NoError(t, err)
		_, err = e.DB.ExecContext(ctx, "UPDATE "+table+" SET state = 'FAILURE' WHERE id % 4 = 0")
		require.NoError(t, err)
	}
	var job models.Job
	require.NoError(t, e.DB.NewSelect().Model(&job).Order("j.id DESC").Limit(1).Scan(ctx))
	_, err = e.DB.ExecContext(ctx, "UPDATE job_stats SET state = 'FAILURE' WHERE id % 4 = 0 AND job_id = ?", job.ID)
	require.NoError(t, err)
	require.NoError(t, models.RefreshJobCounts(ctx, e.DB, job.ID))

	ids := func(r apitest.Response) (out []float64) {
		for _, row := range r.Map()["results"].([]any) {
			out = append(out, row.(map[string]any)["id"].(float64))
		}
		return out
	}
	for list, total := range map[string]int{
		"/api/jobs/?":                                               140,
		"/api/tasks/?":                                              140,
		"/api/jobs/?state=SUCCESS&":                                 105,
		"/api/jobs/?state=FAILURE&":                                 35,
		"/api/tasks/?state=SUCCESS&":                                105,
		"/api/tasks/?state=FAILURE&":                                35,
		fmt.Sprintf("/api/jobstats/?job=%d&", job.ID):               100,
		fmt.Sprintf("/api/jobstats/?job=%d&state=SUCCESS&", job.ID): 75,
		fmt.Sprintf("/api/jobstats/?job=%d&state=FAILURE&", job.ID): 25,
	} {
		all := e.AsAdmin(http.MethodGet, list+"page_size=0", nil)
		require.Equal(t, http.StatusOK, all.Status, list)
		want := ids(all)
		require.Len(t, want, total, list)
		for _, size := range []int{20, 37} {
			var got []float64
			last := (total + size - 1) / size
			for page := 1; page <= last; page++ {
				r := e.AsAdmin(http.MethodGet, fmt.Sprintf("%spage_size=%d&page=%d", list, size, page), nil)
				require.Equal(t, http.StatusOK, r.Status, "%s page %d of %d", list, page, size)
				require.Equal(t, float64(total), r.Map()["count"])
				require.Equal(t, page < last, r.Map()["next"] != nil)
				got = append(got, ids(r)...)
			}
			require.Equal(t, want, got, "%s pages of %d", list, size)
			r := e.AsAdmin(http.MethodGet, fmt.Sprintf("%spage_size=%d&page=%d", list, size, last+1), nil)
			require.Equal(t, http.StatusNotFound, r.Status, list)
		}
	}
}
