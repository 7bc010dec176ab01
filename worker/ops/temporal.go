package ops

import (
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
)

// temporalReportEvery is how often tally hands the SDK's metrics to the
// Prometheus registry: a scrape sees values at most this old.
const temporalReportEvery = time.Second

// TemporalMetrics returns a client.MetricsHandler that exposes the Temporal
// SDK's own metrics (temporal_request, temporal_workflow_task_*,
// temporal_activity_*, temporal_*_poll_*, …) on reg. It is the SDK's
// documented route (a tally scope with tally's Prometheus reporter, as
// go.temporal.io/sdk/contrib/tally does) written out here, since that
// contrib module is not available through the module proxy. Close the
// returned closer when the client is closed.
func TemporalMetrics(reg prometheus.Registerer, log *slog.Logger) (client.MetricsHandler, io.Closer) {
	var once sync.Once
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60,
			300},
		// The SDK emits a few metrics with differing tag sets, which
		// Prometheus refuses; drop those variants rather than panic.
		OnRegisterError: func(err error) {
			once.Do(func() { log.Debug("a Temporal SDK metric was not exported", "error", err) })
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:         reporter,
		Separator:              tallyprom.DefaultSeparator,
		SanitizeOptions:        &tallyprom.DefaultSanitizerOpts,
		OmitCardinalityMetrics: true,
	}, temporalReportEvery)
	return tallyHandler{scope}, closer
}

// tallyHandler adapts a tally scope to the SDK's metrics handler.
type tallyHandler struct{ scope tally.Scope }

func (h tallyHandler) WithTags(tags map[string]string) client.MetricsHandler {
	return tallyHandler{h.scope.Tagged(tags)}
}

func (h tallyHandler) Counter(name string) client.MetricsCounter { return h.scope.Counter(name) }

func (h tallyHandler) Gauge(name string) client.MetricsGauge { return h.scope.Gauge(name) }

func (h tallyHandler) Timer(name string) client.MetricsTimer { return h.scope.Timer(name) }
