package hub_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// BenchmarkLists times the list endpoints through the real HTTP path
// (authentication, database, rendering) on 100,000 jobs, beside a gin
// hello-world served in the same process: the ratio is what the hub costs
// per request over the web framework alone.
// listReqs is the requests of one op of BenchmarkLists.
var listReqs = dbtest.BenchSize(300, 3)

func BenchmarkLists(b *testing.B) {
	for _, kind := range dbtest.Dialects(b) {
		b.Run(kind, func(b *testing.B) {
			e := apitest.New(b, kind)
			ctx := context.Background()
			site, err := models.EnsureSite(ctx, e.DB, "bench")
			if err != nil {
				b.Fatal(err)
			}
			n, perJob := dbtest.BenchSize(100_000, 2_000), dbtest.BenchSize(100_000, 2_000) // jobs; job stats of each of the statsJobs newest jobs
			statsJobs := 1
			if os.Getenv("HUB_BENCH_LARGE") == "1" { // the scale: 1M jobs, 10M job stats
				n, perJob, statsJobs = 1_000_000, 1_000_000, 10
			}
			seedJobs(b, e.DB, kind, site, n, perJob, statsJobs)
			// A small site among them: every 1,000th job, spread over the
			// whole list, is its, and a user's (the others are the
			// system's, which has none there).
			small, err := models.EnsureSite(ctx, e.DB, "small")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.DB.NewUpdate().Table("jobs").Set("site = ?, site_id = ?", small.Name, small.ID).
				Set("owner_type = ?, owner_id = (SELECT id FROM users WHERE username = 'admin'), owner_name = 'admin'", models.OwnerUser).
				Where("id % 1000 = 0").Exec(ctx); err != nil {
				b.Fatal(err)
			}
			var last models.Job
			if err := e.DB.NewSelect().Model(&last).Order("j.id DESC").Limit(1).Scan(ctx); err != nil {
				b.Fatal(err)
			}
			// Fresh statistics, as autovacuum would have after such a load
			// (without them PostgreSQL plans the owners probes as scans).
			if kind == "postgres" {
				if _, err := e.DB.ExecContext(ctx, "ANALYZE jobs; ANALYZE job_stats"); err != nil {
					b.Fatal(err)
				}
			}
			// Enough idle connections for the concurrent clients below
			// (http.DefaultClient keeps two per host).
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			get := func(url, auth string, body io.Writer) error {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				_, _ = io.Copy(body, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s: %d", url, resp.StatusCode)
				}
				return nil
			}
			// The floor under any list: gin writing the bytes of the
			// first jobs page, as kept, with no work to find them.
			var jobsPage bytes.Buffer
			if err := get(e.URL+"/api/jobs/?page_size=100", apitest.Bearer(e.Admin), &jobsPage); err != nil {
				b.Fatal(err)
			}
			hello := gin.New()
			hello.GET("/hello", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"hello": "world"}) })
			// The floor under any list that must read the database once:
			// gin hello after one SELECT 1 through the hub's own pool.
			hello.GET("/hello-db", func(c *gin.Context) {
				var one int
				if err := e.DB.QueryRowContext(c, "SELECT 1").Scan(&one); err != nil {
					c.AbortWithStatus(http.StatusInternalServerError)
					return
				}
				c.JSON(http.StatusOK, gin.H{"hello": "world"})
			})
			hello.GET("/jobs-page", func(c *gin.Context) { c.Data(http.StatusOK, "application/json; charset=utf-8", jobsPage.Bytes()) })
			srv := httptest.NewServer(hello)
			defer srv.Close()
			// change, run before each request with the clock stopped,
			// moves the oldest job (on no first page), as a running job
			// elsewhere does: no whole page kept before it is current.
			const oldest = "UPDATE jobs SET numfiles = numfiles + 1 WHERE id = (SELECT MIN(id) FROM jobs)"
			for _, c := range []struct {
				name, url, auth string
				clients         int    // at once (default 1)
				change          string // SQL run before each request, unmeasured
			}{
				{"gin-hello", srv.URL + "/hello", "", 0, ""},
				{"gin-hello-8-clients", srv.URL + "/hello", "", 8, ""},
				{"gin-hello-select1", srv.URL + "/hello-db", "", 0, ""},
				{"gin-jobs-page-bytes", srv.URL + "/jobs-page", "", 0, ""},
				{"sites", e.URL + "/api/sites/", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-page-100", e.URL + "/api/jobs/?page_size=100", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-page-100-state", e.URL + "/api/jobs/?page_size=100&state=SUCCESS", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-page-100-site", e.URL + "/api/jobs/?page_size=100&site=bench", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-page-100-site-small", e.URL + "/api/jobs/?page_size=100&site=small", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-recent-site", e.URL + "/api/jobs/recent/?site=bench", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-stats", e.URL + "/api/jobs/stats/", apitest.Bearer(e.Admin), 0, ""},
				{"jobs-page-100-last", fmt.Sprintf("%s/api/jobs/?page_size=100&page=%d", e.URL, n/100), apitest.Bearer(e.Admin), 0, ""},
				{"jobstats-page-100", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100", e.URL, last.ID), apitest.Bearer(e.Admin), 0, ""},
				{"jobstats-page-100-failed", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100&state=FAILURE", e.URL, last.ID), apitest.Bearer(e.Admin), 0, ""},
				{"jobstats-page-100-success", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100&state=SUCCESS", e.URL, last.ID), apitest.Bearer(e.Admin), 0, ""},
				{"job-statistics", fmt.Sprintf("%s/api/jobs/%d/statistics/", e.URL, last.ID), apitest.Bearer(e.Admin), 0, ""},
				{"jobstats-page-100-last", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100&page=%d", e.URL, last.ID, perJob/100), apitest.Bearer(e.Admin), 0, ""},
				{"tasks-page-100", e.URL + "/api/tasks/?page_size=100", apitest.Bearer(e.Admin), 0, ""},
				{"tasks-page-100-state", e.URL + "/api/tasks/?page_size=100&state=SUCCESS", apitest.Bearer(e.Admin), 0, ""},
				{"tasks-page-100-last", fmt.Sprintf("%s/api/tasks/?page_size=100&page=%d", e.URL, n/100), apitest.Bearer(e.Admin), 0, ""},
				{"sites-8-clients", e.URL + "/api/sites/", apitest.Bearer(e.Admin), 8, ""},
				{"jobs-page-100-8-clients", e.URL + "/api/jobs/?page_size=100", apitest.Bearer(e.Admin), 8, ""},
				{"tasks-page-100-8-clients", e.URL + "/api/tasks/?page_size=100", apitest.Bearer(e.Admin), 8, ""},
				{"jobstats-page-100-8-clients", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100", e.URL, last.ID), apitest.Bearer(e.Admin), 8, ""},
				{"jobs-page-100-changing", e.URL + "/api/jobs/?page_size=100", apitest.Bearer(e.Admin), 0, oldest},
				{"tasks-page-100-changing", e.URL + "/api/tasks/?page_size=100", apitest.Bearer(e.Admin), 0, oldest},
				{"jobstats-page-100-changing", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100", e.URL, last.ID), apitest.Bearer(e.Admin), 0, oldest},
			} {
				b.Run(c.name, func(b *testing.B) {
					// Each op is listReqs requests: enough for a rate,
					// whatever -benchtime says. With clients, they share
					// the requests and ms/req is the wall time over all of
					// them (the inverse of the rate). Before the clock
					// starts, one request per client, at once, so that
					// each client's connection is open.
					clients := max(c.clients, 1)
					var warm errgroup.Group
					for range clients {
						warm.Go(func() error { return get(c.url, c.auth, io.Discard) })
					}
					if err := warm.Wait(); err != nil {
						b.Fatal(err)
					}
					each := max(b.N*listReqs/clients, 1)
					// With a change, the requests alone are timed, one by
					// one (b.StopTimer around the change would stop the
					// world at every request, which costs the next about
					// 0.2 ms: measured with SELECT 1 as the change).
					var requests time.Duration
					b.ResetTimer()
					var g errgroup.Group
					for range clients {
						g.Go(func() error {
							for range each {
								if c.change != "" {
									if _, err := e.DB.ExecContext(ctx, c.change); err != nil {
										return err
									}
								}
								start := time.Now()
								if err := get(c.url, c.auth, io.Discard); err != nil {
									return err
								}
								if c.change != "" {
									requests += time.Since(start) // one client
								}
							}
							return nil
						})
					}
					if err := g.Wait(); err != nil {
						b.Fatal(err)
					}
					elapsed := b.Elapsed()
					if c.change != "" {
						elapsed = requests
					}
					b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(each*clients), "ms/req")
				})
			}
		})
	}
}

// seedJobs writes n finished jobs of site, newest last, one task each,
// and perJob job stats for each of the statsJobs newest, with set-based
// SQL (a million rows take seconds, not the minutes of row inserts).
func seedJobs(b testing.TB, db *bun.DB, kind string, site *models.Site, n, perJob, statsJobs int) {
	ctx := context.Background()
	series := `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) `
	at := func(col string) string { // col seconds before now, in the form each database stores
		return `strftime('%Y-%m-%d %H:%M:%S', 'now', '-' || (` + col + `) || ' seconds') || '+00:00'`
	}
	if kind == "postgres" {
		series = `WITH c(x) AS (SELECT generate_series(1, ?)) `
		at = func(col string) string { return `now() - make_interval(secs => ` + col + `)` }
	}
	stmts := []struct {
		sql  string
		args []any
	}{
		{series + `INSERT INTO jobs (workflow, definition, site, site_id, queue, fields, paths, state, created, updated, owner_type, owner_name, run)
			SELECT 'premigrate', '{}', ?, ?, 'default', '{}', '["/data"]', 'SUCCESS', ` + at("? - x") + `, ` + at("? - x") + `, 'system', 'System', 1 FROM c`,
			[]any{n, site.Name, site.ID, n, n}},
		{`INSERT INTO tasks (job_id, site, queue, tasktype, task_id, state, created, run)
			SELECT id, site, 'default', 'premigrate', 'job-' || id || '-r1-b0-r1-s0', 'SUCCESS', created, 1 FROM jobs`, nil},
		{series + `INSERT INTO job_stats (job_id, path, state, code, updated, size)
			SELECT j.id, '/data/d' || (x % 1000) || '/f' || x, 'SUCCESS', 'ok', j.created, x
			FROM (SELECT id, created FROM jobs ORDER BY id DESC LIMIT ?) AS j CROSS JOIN c`, []any{perJob, statsJobs}},
		{`UPDATE job_stats SET state = 'FAILURE', code = 'failed' WHERE id % 1000 = 0`, nil}, // every 1,000th path failed
		// Every job and task was updated since it was created, as real
		// ones are (started, finished): its row's version is not the first.
		{`UPDATE jobs SET progress = 100, numfiles = 1, numprocessedfiles = 1`, nil},
		{`UPDATE tasks SET started = created`, nil},
	}
	for _, st := range stmts {
		if _, err := db.ExecContext(ctx, st.sql, st.args...); err != nil {
			b.Fatal(err)
		}
	}
	// The counters of the jobs with stats, as the hub recounts them.
	var ids []int64
	if err := db.NewSelect().Table("jobs").Column("id").Order("id DESC").Limit(int64(statsJobs)).Scan(ctx, &ids); err != nil {
		b.Fatal(err)
	}
	for _, id := range ids {
		if err := models.RefreshJobCounts(ctx, db, id); err != nil {
			b.Fatal(err)
		}
	}
}
