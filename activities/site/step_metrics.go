package site

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StepMetrics counts what job steps do on a site worker: paths by step
// and outcome, bytes of the files that succeeded, and how long each
// step's run over a batch took. Counts move as each chunk of a batch is
// journaled, so they advance during a long batch, not only at its end.
// A nil *StepMetrics counts nothing.
type StepMetrics struct {
	files    *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewStepMetrics registers hub_step_files_total, hub_step_bytes_total and
// hub_step_duration_seconds with reg.
func NewStepMetrics(reg prometheus.Registerer) *StepMetrics {
	m := &StepMetrics{
		files: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hub_step_files_total",
			Help: "Paths a job step finished on this worker, by site, step and outcome (SUCCESS, FAILURE, SKIPPED).",
		}, []string{"site", "step", "outcome"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hub_step_bytes_total",
			Help: "Bytes of the files a job step finished with success on this worker (their size when the batch was discovered), by site and step.",
		}, []string{"site", "step"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hub_step_duration_seconds",
			Help:    "Time one attempt of a job step took over one batch on this worker, by site and step.",
			Buckets: prometheus.ExponentialBuckets(0.05, 4, 10), // 50 ms … ~3.6 h
		}, []string{"site", "step"}),
	}
	reg.MustRegister(m.files, m.bytes, m.duration)
	return m
}

// timed starts timing a step over a batch; call the result when it ends.
func (m *StepMetrics) timed(site, step string) func() {
	if m == nil {
		return func() {}
	}
	start := time.Now()
	return func() { m.duration.WithLabelValues(site, step).Observe(time.Since(start).Seconds()) }
}

// counted wraps a step's chunk function so each chunk's outcomes are
// counted once they are known.
func (m *StepMetrics) counted(site, step string, run chunkFunc) chunkFunc {
	if m == nil {
		return run
	}
	return func(ctx context.Context, chunk []batchEntry) ([]Outcome, error) {
		outs, err := run(ctx, chunk)
		if err != nil {
			return outs, err
		}
		size := make(map[string]int64, len(chunk))
		for _, e := range chunk {
			size[e.Path] = e.Size
		}
		var bytes int64
		for _, o := range outs {
			m.files.WithLabelValues(site, step, o.State).Inc()
			if o.State == OutcomeSuccess {
				bytes += size[o.Path]
			}
		}
		m.bytes.WithLabelValues(site, step).Add(float64(bytes))
		return outs, nil
	}
}
