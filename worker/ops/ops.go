// Package ops serves what an operator's tooling asks of every hub process:
// an unauthenticated liveness probe (/healthz), a readiness probe that
// checks the process's dependencies (/readyz), and Prometheus metrics
// (/metrics). It also holds the collectors behind those metrics. See
// docs/operations.md.
package ops

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one dependency /readyz probes: Probe returns nil when it is
// reachable.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// checkTimeout bounds each probe, so a hung database answers 503 well
// before a load balancer's own probe timeout (commonly 5–10 s).
const checkTimeout = 3 * time.Second

// Probes answers /healthz and /readyz. Until SetChecks is called (the
// process is still connecting to its dependencies) /readyz answers 503.
type Probes struct {
	mu       sync.Mutex
	checks   []Check
	ready    bool
	starting string
}

// NewProbes returns probes of a process that is starting.
func NewProbes() *Probes { return &Probes{starting: "connecting to the database and Temporal"} }

// Starting says what the process is waiting for while it starts; /readyz
// reports it.
func (p *Probes) Starting(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting = what
}

// SetChecks marks the process started: from now on /readyz runs checks.
func (p *Probes) SetChecks(checks ...Check) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks, p.ready = checks, true
}

// Readiness is the body of /readyz.
type Readiness struct {
	Status string `json:"status"` // "ok", "starting" or "unavailable"
	// Checks has one entry per dependency: "ok" or why it failed.
	Checks map[string]string `json:"checks,omitempty"`
	// Failed names the dependencies that failed, sorted.
	Failed []string `json:"failed,omitempty"`
	// Detail says what a starting process waits for.
	Detail string `json:"detail,omitempty"`
}

// Check runs every check at once and reports them.
func (p *Probes) Check(ctx context.Context) Readiness {
	p.mu.Lock()
	checks, ready, starting := p.checks, p.ready, p.starting
	p.mu.Unlock()
	if !ready {
		return Readiness{Status: "starting", Detail: starting}
	}
	r := Readiness{Status: "ok", Checks: make(map[string]string, len(checks))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			defer cancel()
			res := "ok"
			if err := c.Probe(cctx); err != nil {
				res = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			r.Checks[c.Name] = res
			if res != "ok" {
				r.Failed = append(r.Failed, c.Name)
			}
		})
	}
	wg.Wait()
	if len(r.Failed) > 0 {
		sort.Strings(r.Failed)
		r.Status = "unavailable"
	}
	return r
}

// Healthz answers 200 while the process runs: it checks nothing else, so
// an orchestrator restarts only a process that no longer answers.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz answers 200 when every dependency is reachable, else 503 with a
// body naming what failed.
func (p *Probes) Readyz(w http.ResponseWriter, r *http.Request) {
	res := p.Check(r.Context())
	code := http.StatusOK
	if res.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Mount adds /healthz and /readyz to mux.
func (p *Probes) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", Healthz)
	mux.HandleFunc("GET /readyz", p.Readyz)
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors; each process has its own, so tests can run several.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves /healthz, /readyz and /metrics (from reg) on the ops
// listener.
func Handler(p *Probes, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	p.Mount(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// WithProbes serves /healthz and /readyz beside next (an API server), so
// a load balancer can probe the port it sends traffic to. Every other
// request goes to next untouched (no path cleaning or redirects).
func WithProbes(p *Probes, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			switch r.URL.Path {
			case "/healthz":
				Healthz(w, r)
				return
			case "/readyz":
				p.Readyz(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
