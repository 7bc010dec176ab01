package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/cmd/hub/hardening"
	"github.com/thehub/hub/worker/ops"
)

// opsLimits are the limits of the ops listener: probes and scrapes are
// small and come from a few monitoring hosts.
var opsLimits = hardening.Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      30 * time.Second, // a scrape of a busy process
	IdleTimeout:       60 * time.Second,
	MaxHeaderBytes:    16 << 10,
	MaxConns:          64,
}

// opsRuntime is the process's probes and metrics, and the listener
// serving them when HUB_OPS_ADDR is set.
type opsRuntime struct {
	probes   *ops.Probes
	reg      *prometheus.Registry
	http     *ops.HTTPMetrics
	steps    *site.StepMetrics
	temporal client.MetricsHandler
	closer   io.Closer
	srv      *http.Server
	addr     net.Addr
}

// startOps builds the metrics of a process and serves them, with the
// probes, on cfg.OpsAddr. It runs first, so /healthz answers and /readyz
// says "starting" while the process still waits for its dependencies.
func startOps(cfg *Config, log *slog.Logger) (*opsRuntime, error) {
	o := &opsRuntime{probes: ops.NewProbes(), reg: ops.NewRegistry()}
	v := buildVersion()
	o.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hub_build_info", Help: "Always 1; the labels say which hub build runs.",
		ConstLabels: prometheus.Labels{"version": v, "goversion": runtime.Version()},
	}, func() float64 { return 1 }))
	o.http = ops.NewHTTPMetrics(o.reg)
	o.steps = site.NewStepMetrics(o.reg)
	o.temporal, o.closer = ops.TemporalMetrics(o.reg, log)
	cfg.waiting = o.probes.Starting
	if cfg.OpsAddr == "" {
		return o, nil
	}
	ln, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		_ = o.closer.Close()
		return nil, fmt.Errorf("cannot listen on %s (set HUB_OPS_ADDR, or empty it for no ops listener): %w", cfg.OpsAddr, err)
	}
	o.addr = ln.Addr()
	lim := opsLimits
	lim.Log = log
	o.srv = lim.Server(ops.Handler(o.probes, o.reg))
	go func() {
		if err := o.srv.Serve(lim.Listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ops listener stopped", "addr", ln.Addr().String(), "error", err)
		}
	}()
	log.Info("ops listener started", "addr", ln.Addr().String(), "paths", "/healthz /readyz /metrics")
	return o, nil
}

// stop closes the listener and the Temporal metrics scope.
func (o *opsRuntime) stop() {
	if o.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = o.srv.Shutdown(ctx)
	}
	_ = o.closer.Close()
}

// hubChecks are the readiness checks of a process with the hub database.
func hubChecks(db *bun.DB, tc client.Client) []ops.Check {
	return []ops.Check{dbCheck(db), temporalCheck(tc)}
}

func dbCheck(db *bun.DB) ops.Check {
	return ops.Check{Name: "database", Probe: db.PingContext}
}

func temporalCheck(tc client.Client) ops.Check {
	return ops.Check{Name: "temporal", Probe: func(ctx context.Context) error {
		_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}}
}

// ready marks a process with the hub database started: /readyz checks
// the database and Temporal, and /metrics counts jobs by state.
func (o *opsRuntime) ready(db *bun.DB, tc client.Client) {
	o.reg.MustRegister(ops.NewJobsCollector(db))
	o.probes.SetChecks(hubChecks(db, tc)...)
}
