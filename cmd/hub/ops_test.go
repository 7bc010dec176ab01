package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/worker/devserver"
)

// freeAddr returns a loopback address no one listens on now, on a port
// no outgoing connection takes before the hub binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// runHub runs the hub command with args in this process until the test
// ends, and returns a channel with its result.
func runHub(t *testing.T, env map[string]string, args ...string) <-chan error {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cmd := rootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("hub did not stop within 30 s")
		}
	})
	return done
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		return 0, nil
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// waitReady waits for /readyz at base to answer 200.
func waitReady(t *testing.T, base string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body := get(t, base+"/readyz")
		if code == http.StatusOK {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("hub stopped before it was ready: %v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "not ready: %d %s", code, body)
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape reads /metrics at base.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return fams
}

// value sums the samples of a family whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func apiDo(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer r.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(r.Body).Decode(&out)
	return r.StatusCode, out
}

// TestDevMetricsDuringJob runs hub dev (embedded Temporal, sqlite, real
// site workers over real folders), runs a premigrate job through the API
// and scrapes /metrics while it runs: the HTTP, job, step and Temporal
// SDK series move, and the probes answer on the ops and API listeners.
func TestDevMetricsDuringJob(t *testing.T) {
	data := t.TempDir()
	api, ops := freeAddr(t), freeAddr(t)
	done := runHub(t, map[string]string{"HUB_LOG_FORMAT": "json", "HUB_LOG_LEVEL": "warn"},
		"dev", "--data-dir", data, "--api-addr", api, "--cj-addr", freeAddr(t), "--auth-addr", freeAddr(t),
		"--temporal-addr", freeAddr(t), "--temporal-ui-addr", freeAddr(t), "--ops-addr", ops,
		"--admin-password", "metrics-admin-1", "--dev-sites", "site1")
	opsURL, apiURL := "http://"+ops, "http://"+api
	waitReady(t, opsURL, done)

	code, body := get(t, opsURL+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, string(body))
	code, body = get(t, apiURL+"/readyz")
	require.Equal(t, http.StatusOK, code, "probes answer on the API port too, unauthenticated")
	require.JSONEq(t, `{"status":"ok","checks":{"database":"ok","temporal":"ok"}}`, string(body))
	cmd := rootCmd()
	cmd.SetArgs([]string{"probe", "readyz", "--ops-addr", ops})
	require.NoError(t, cmd.Execute(), "hub probe readyz exits 0 on a ready process")
	code, _ = get(t, apiURL+"/metrics")
	require.Equal(t, http.StatusNotFound, code, "metrics stay on the ops listener")

	const n = 600
	var size int64
	for i := range n {
		p := filepath.Join(data, "sites", "site1", "data", fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%04d", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		b := bytes.Repeat([]byte{byte(i)}, 100+i)
		size += int64(len(b))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}

	before := scrape(t, opsURL)
	submit := map[string]string{"server": "api", "method": "POST", "route": "/api/file/workflow/", "status": "201"}
	stepOK := map[string]string{"site": "site1", "step": "premigrate", "outcome": "SUCCESS"}
	require.Zero(t, value(before, "hub_http_requests_total", submit))
	require.Zero(t, value(before, "hub_jobs", map[string]string{"state": "SUCCESS"}))
	require.Zero(t, value(before, "hub_step_files_total", stepOK))
	require.NotNil(t, before["hub_jobs"], "jobs by state are reported before any job")

	code, tok := apiDo(t, http.MethodPost, apiURL+"/api/auth/token/", "", map[string]string{"username": "admin", "password": "metrics-admin-1"})
	require.Equal(t, http.StatusCreated, code, tok)
	token := tok["access"].(string)
	code, job := apiDo(t, http.MethodPost, apiURL+"/api/file/workflow/", token,
		map[string]any{"site": "site1", "workflow": "premigrate", "paths": []string{"/data"}})
	require.Equal(t, http.StatusCreated, code, job)
	id := int64(job["job"].(float64))

	// Scrape while the job runs: the step counters move chunk by chunk.
	var partial []float64
	deadline := time.Now().Add(3 * time.Minute)
	var state string
	for {
		files := value(scrape(t, opsURL), "hub_step_files_total", stepOK)
		if files > 0 && files < n {
			partial = append(partial, files)
		}
		_, j := apiDo(t, http.MethodGet, fmt.Sprintf("%s/api/jobs/%d/", apiURL, id), token, nil)
		state, _ = j["state"].(string)
		if state == "SUCCESS" || state == "FAILURE" || state == "CANCELLED" {
			break
		}
		require.True(t, time.Now().Before(deadline), "job %d still %s", id, state)
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, "SUCCESS", state)
	require.NotEmpty(t, partial, "no scrape saw the step counters between 0 and %d while the job ran", n)

	require.Eventually(t, func() bool { // the job count is cached for 5 s
		return value(scrape(t, opsURL), "hub_jobs", map[string]string{"state": "SUCCESS"}) == 1
	}, 30*time.Second, 250*time.Millisecond)
	after := scrape(t, opsURL)
	require.Equal(t, 1.0, value(after, "hub_http_requests_total", submit))
	require.Positive(t, value(after, "hub_http_requests_total",
		map[string]string{"route": "/api/jobs/:id/", "method": "GET", "status": "200"}), "routes are patterns, not URLs")
	require.Positive(t, value(after, "hub_http_request_duration_seconds", map[string]string{"route": "/api/file/workflow/"}))
	require.Equal(t, float64(n), value(after, "hub_step_files_total", stepOK))
	require.Equal(t, float64(size), value(after, "hub_step_bytes_total", map[string]string{"site": "site1", "step": "premigrate"}))
	require.Positive(t, value(after, "hub_step_duration_seconds", map[string]string{"site": "site1", "step": "premigrate"}))
	require.Positive(t, value(after, "temporal_workflow_completed", map[string]string{"workflow_type": "JobWorkflow"}),
		"the Temporal SDK's own metrics are exported")
	require.Positive(t, value(after, "temporal_activity_execution_latency", map[string]string{"activity_type": "RunStep"}))
	for name := range after {
		require.False(t, strings.Contains(name, "tally"), "no tally internals: %s", name)
	}
}

// TestWorkerProbesWhileStarting runs hub worker --hub against a Temporal
// address where nothing listens: the process stays up retrying, /healthz
// answers and /readyz says 503 with what it waits for.
func TestWorkerProbesWhileStarting(t *testing.T) {
	ops := freeAddr(t)
	done := runHub(t, map[string]string{"HUB_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
		"worker", "--hub", "--data-dir", t.TempDir(), "--temporal-addr", freeAddr(t), "--ops-addr", ops)
	base := "http://" + ops
	require.Eventually(t, func() bool { code, _ := get(t, base+"/healthz"); return code == http.StatusOK },
		30*time.Second, 50*time.Millisecond)
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	var r struct{ Status, Detail string }
	require.NoError(t, json.Unmarshal(body, &r))
	require.Equal(t, "starting", r.Status)
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/readyz")
		require.NoError(t, json.Unmarshal(body, &r))
		return strings.Contains(r.Detail, "cannot connect to Temporal at") && strings.Contains(r.Detail, "attempt")
	}, 30*time.Second, 100*time.Millisecond, "readyz says what the worker waits for: %s", r.Detail)
	// hub probe, the image's healthcheck, says the same by its exit code.
	probe := func(what string) error {
		cmd := rootCmd()
		cmd.SetArgs([]string{"probe", what, "--ops-addr", ops})
		return cmd.Execute()
	}
	require.NoError(t, probe("healthz"))
	require.ErrorContains(t, probe("readyz"), "503 Service Unavailable")
	time.Sleep(2 * time.Second) // several attempts
	select {
	case err := <-done:
		t.Fatalf("the worker gave up instead of retrying: %v", err)
	default:
	}
}
