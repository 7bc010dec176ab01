package ops

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// jobStates are reported even when no job is in them, so a dashboard's
// series exist from the start and fall back to zero.
var jobStates = []string{vocab.JobPending, vocab.JobStarted, vocab.JobPausing, vocab.JobPaused,
	vocab.JobCancelling, vocab.JobCancelled, vocab.JobSuccess, vocab.JobFailure}

// jobsCacheFor is how long one count serves scrapes: several Prometheus
// servers or replicas scraping every few seconds then cost the database
// one read of the numbers the database keeps per state per interval.
const jobsCacheFor = 5 * time.Second

// JobsCollector reports hub_jobs{state}, the number of jobs in each
// state, as the hub database keeps it (models.CountJobsByState), when
// scraped.
type JobsCollector struct {
	db   bun.IDB
	desc *prometheus.Desc
	up   *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	counts map[string]float64
	err    error
}

// NewJobsCollector returns the collector over db; register it on the
// registry of a process that has the hub database.
func NewJobsCollector(db bun.IDB) *JobsCollector {
	return &JobsCollector{
		db:   db,
		desc: prometheus.NewDesc("hub_jobs", "Jobs in the hub database by state, counted at scrape time (cached 5 s).", []string{"state"}, nil),
		up:   prometheus.NewDesc("hub_jobs_count_up", "1 when the last count of jobs by state succeeded, 0 when the database did not answer.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *JobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.up }

// Collect implements prometheus.Collector.
func (c *JobsCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.count()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range jobStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, counts[s], s)
	}
	for s, n := range counts {
		if !known(s) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, s)
		}
	}
}

func known(state string) bool {
	for _, s := range jobStates {
		if s == state {
			return true
		}
	}
	return false
}

func (c *JobsCollector) count() (map[string]float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < jobsCacheFor {
		return c.counts, c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	kept, err := models.CountJobsByState(ctx, c.db)
	counts := make(map[string]float64, len(kept))
	for s, n := range kept {
		counts[s] = float64(n)
	}
	c.at, c.counts, c.err = time.Now(), counts, err
	return counts, err
}
