package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/worker/ops"
	"github.com/thehub/hub/workflows/vocab"
)

func TestReadyzNamesWhatFailed(t *testing.T) {
	t.Parallel()
	p := ops.NewProbes()
	reg := ops.NewRegistry()
	srv := httptest.NewServer(ops.Handler(p, reg))
	defer srv.Close()

	get := func(path string) (int, ops.Readiness) {
		r, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer r.Body.Close()
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var body ops.Readiness
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		return r.StatusCode, body
	}
	code, _ := get("/healthz")
	require.Equal(t, http.StatusOK, code)
	code, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "starting", body.Status)

	dbErr := errors.New("dial tcp 10.0.0.1:5432: connection refused")
	p.SetChecks(
		ops.Check{Name: "database", Probe: func(context.Context) error { return dbErr }},
		ops.Check{Name: "temporal", Probe: func(context.Context) error { return nil }},
	)
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, ops.Readiness{Status: "unavailable", Failed: []string{"database"},
		Checks: map[string]string{"database": dbErr.Error(), "temporal": "ok"}}, body)

	// A probe that hangs is cut short: the answer comes, and says so.
	p.SetChecks(ops.Check{Name: "temporal", Probe: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }})
	start := time.Now()
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, []string{"temporal"}, body.Failed)

	p.SetChecks(ops.Check{Name: "temporal", Probe: func(context.Context) error { return nil }})
	code, body = get("/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body.Status)
}

func TestWithProbesLeavesOtherPathsAlone(t *testing.T) {
	t.Parallel()
	p := ops.NewProbes()
	p.SetChecks()
	var seen []string
	h := ops.WithProbes(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodHead, "/readyz", http.StatusOK},
		{http.MethodPost, "/healthz", http.StatusTeapot},
		{http.MethodGet, "/api//x/../healthz", http.StatusTeapot},
		{http.MethodGet, "/healthz/", http.StatusTeapot},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.code, w.Code, tc.method+" "+tc.path)
	}
	require.Equal(t, []string{"POST /healthz", "GET /api//x/../healthz", "GET /healthz/"}, seen, "no cleaning, no redirects")
}

func TestHTTPMetricsBoundLabels(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := ops.NewHTTPMetrics(reg)
	m.ObserveRequest("api", "GET", "/api/jobs/:id/", 200, time.Millisecond)
	m.ObserveRequest("api", "BREW", "", 404, time.Millisecond)
	const want = `
# HELP hub_http_requests_total HTTP requests answered, by server (api, cj, auth), method, route pattern and status code.
# TYPE hub_http_requests_total counter
hub_http_requests_total{method="GET",route="/api/jobs/:id/",server="api",status="200"} 1
hub_http_requests_total{method="other",route="unmatched",server="api",status="404"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "hub_http_requests_total"))
}

func TestJobsCollectorCountsByState(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		site, err := models.EnsureSite(ctx, db, "west")
		require.NoError(t, err)
		for _, state := range []string{vocab.JobStarted, vocab.JobSuccess, vocab.JobSuccess, "WEIRD"} {
			j := &models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
				OwnerType: models.OwnerSystem, Definition: models.JobDefinition{Name: "premigrate", FilterRules: []models.FilterRule{}}}
			require.NoError(t, models.CreateJob(ctx, db, j))
			_, err := db.NewUpdate().Model((*models.Job)(nil)).Where("id = ?", j.ID).Set("state = ?", state).Exec(ctx)
			require.NoError(t, err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(ops.NewJobsCollector(db))
		const want = `
# HELP hub_jobs Jobs in the hub database by state, counted at scrape time (cached 5 s).
# TYPE hub_jobs gauge
hub_jobs{state="CANCELLED"} 0
hub_jobs{state="CANCELLING"} 0
hub_jobs{state="FAILURE"} 0
hub_jobs{state="PAUSED"} 0
hub_jobs{state="PAUSING"} 0
hub_jobs{state="PENDING"} 0
hub_jobs{state="STARTED"} 1
hub_jobs{state="SUCCESS"} 2
hub_jobs{state="WEIRD"} 1
# HELP hub_jobs_count_up 1 when the last count of jobs by state succeeded, 0 when the database did not answer.
# TYPE hub_jobs_count_up gauge
hub_jobs_count_up 1
`
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "hub_jobs", "hub_jobs_count_up"))

		// A database that does not answer is reported, not a failed scrape.
		down := prometheus.NewRegistry()
		closed := dbtest.Open(t, dbtest.Dialects(t)[0])
		require.NoError(t, closed.Close())
		down.MustRegister(ops.NewJobsCollector(closed))
		require.NoError(t, testutil.GatherAndCompare(down, strings.NewReader(`
# HELP hub_jobs_count_up 1 when the last count of jobs by state succeeded, 0 when the database did not answer.
# TYPE hub_jobs_count_up gauge
hub_jobs_count_up 0
`), "hub_jobs", "hub_jobs_count_up"))
	})
}
