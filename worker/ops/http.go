package ops

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPMetrics counts the requests of the process's HTTP servers and times
// them. Routes are the router's patterns ("/api/jobs/:id/"), never raw
// URLs, so the series stay few whatever clients send; a request that
// matched no route is "unmatched".
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics registers hub_http_requests_total and
// hub_http_request_duration_seconds with reg.
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hub_http_requests_total",
			Help: "HTTP requests answered, by server (api, cj, auth), method, route pattern and status code.",
		}, []string{"server", "method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hub_http_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its answer, by server, method and route pattern.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"server", "method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// knownMethods keeps the method label bounded: anything else is "other".
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true,
	"DELETE": true, "OPTIONS": true}

// ObserveRequest records one finished request (web.RequestObserver).
func (m *HTTPMetrics) ObserveRequest(server, method, route string, status int, d time.Duration) {
	if !knownMethods[method] {
		method = "other"
	}
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(server, method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(server, method, route).Observe(d.Seconds())
}
