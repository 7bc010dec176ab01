package hub_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// BenchmarkLists times the list endpoints through the real HTTP path
// (authentication, database, rendering) on 100,000 jobs, beside a gin
// hello-world served in the same process: the ratio is what the hub costs
// per request over the web framework alone.
func BenchmarkLists(b *testing.B) {
	for _, kind := range dbtest.Dialects(b) {
		b.Run(kind, func(b *testing.B) {
			e := apitest.New(b, kind)
			ctx := context.Background()
			site, err := models.EnsureSite(ctx, e.DB, "bench")
			if err != nil {
				b.Fatal(err)
			}
			const n = 100_000
			jobs := make([]models.Job, 0, 1000)
			created := time.Now().Add(-n * time.Second).UTC()
			for i := 0; i < n; i++ {
				at := created.Add(time.Duration(i) * time.Second)
				jobs = append(jobs, models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
					State: vocab.JobSuccess, Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, OwnerName: "System",
					Fields: map[string]any{}, Paths: []string{"/data"}})
				if len(jobs) == cap(jobs) || i == n-1 {
					if _, err := e.DB.NewInsert().Model(&jobs).Exec(ctx); err != nil {
						b.Fatal(err)
					}
					jobs = jobs[:0]
				}
			}
			// The last job gets 100,000 paths of job stats.
			var last models.Job
			if err := e.DB.NewSelect().Model(&last).Order("j.id DESC").Limit(1).Scan(ctx); err != nil {
				b.Fatal(err)
			}
			stats := make([]models.JobStat, 0, 1000)
			for i := 0; i < n; i++ {
				size := int64(i)
				stats = append(stats, models.JobStat{JobID: last.ID, Path: fmt.Sprintf("/data/d%03d/f%06d", i%1000, i),
					State: vocab.TaskSuccess, Updated: created, Size: &size})
				if len(stats) == cap(stats) || i == n-1 {
					if _, err := e.DB.NewInsert().Model(&stats).Exec(ctx); err != nil {
						b.Fatal(err)
					}
					stats = stats[:0]
				}
			}
			// Fresh statistics, as autovacuum would have after such a load
			// (without them PostgreSQL plans the owners probes as scans).
			if kind == "postgres" {
				if _, err := e.DB.ExecContext(ctx, "ANALYZE jobs; ANALYZE job_stats"); err != nil {
					b.Fatal(err)
				}
			}
			hello := gin.New()
			hello.GET("/hello", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"hello": "world"}) })
			srv := httptest.NewServer(hello)
			defer srv.Close()
			get := func(b *testing.B, url, auth string) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", url, resp.StatusCode)
				}
			}
			for _, c := range []struct{ name, url, auth string }{
				{"gin-hello", srv.URL + "/hello", ""},
				{"sites", e.URL + "/api/sites/", apitest.Bearer(e.Admin)},
				{"jobs-page-100", e.URL + "/api/jobs/?page_size=100", apitest.Bearer(e.Admin)},
				{"jobs-page-100-last", fmt.Sprintf("%s/api/jobs/?page_size=100&page=%d", e.URL, n/100), apitest.Bearer(e.Admin)},
				{"jobstats-page-100", fmt.Sprintf("%s/api/jobstats/?job=%d&page_size=100", e.URL, last.ID), apitest.Bearer(e.Admin)},
			} {
				b.Run(c.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						get(b, c.url, c.auth)
					}
				})
			}
		})
	}
}
