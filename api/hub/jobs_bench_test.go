package hub_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// benchQuick is HUB_BENCH_QUICK=1: `make test` runs every benchmark once
// at a small size (seconds), so that they never rot; `make bench` runs
// them at the sizes the issue notes report.
var benchQuick = os.Getenv("HUB_BENCH_QUICK") == "1"

// benchSize is full, or quick in quick mode.
func benchSize(full, quick int) int {
	if benchQuick {
		return quick
	}
	return full
}

// BenchmarkJobPremigrate measures a whole premigrate job of 2,000 files of
// 4 KiB through the real path (API, Temporal, site worker, database) and,
// in the same run, `cp -r` of the same tree followed by `sync -f` (the
// issue's baseline), so the ratio is meaningful on a noisy machine.
// Reported: files/s.
//
// HUB_BENCH_JOB_FILES sets the number of files (e.g. 100000, the issue's
// case).
func BenchmarkJobPremigrate(b *testing.B) {
	for _, kind := range dbtest.Dialects(b) {
		b.Run(kind, func(b *testing.B) { benchJobPremigrate(b, kind) })
	}
}

// benchJobPremigrate is BenchmarkJobPremigrate on one database (the hub's
// own: sqlite or PostgreSQL; Temporal is the embedded server either way).
func benchJobPremigrate(b *testing.B, kind string) {
	n := benchSize(2000, 100)
	if v, err := strconv.Atoi(os.Getenv("HUB_BENCH_JOB_FILES")); err == nil && v > 0 {
		n = v
	}
	e := apitest.New(b, kind)
	e.StartHubWorker()
	s := newJobSiteB(b, e, "bench")
	// Writing the files again makes them resident (a premigrated record
	// no longer matches a rewritten file), so each round does full work.
	// Every file has content of its own, as real files do (identical
	// files would share one remote copy).
	writeTree := func(round int) {
		data := make([]byte, 4096)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(data, uint64(round)<<40|uint64(i))
			dir := filepath.Join(s.root, "data", fmt.Sprintf("d%03d", i/1000))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	round := 0
	var maxEvents int64
	b.Run("job", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			_ = os.RemoveAll(s.targetDir)
			_ = os.MkdirAll(s.targetDir, 0o755)
			round++
			writeTree(round)
			b.StartTimer()
			id, j := premigrateJob(b, e, "bench", "/data", 20*time.Millisecond)
			if j["numprocessedfiles"].(float64) != float64(n) {
				b.Fatalf("job %v", j)
			}
			maxEvents = max(maxEvents, longestRun(b, e, id))
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "files/s")
		b.ReportMetric(float64(maxEvents), "max-run-events")
		b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-rss-MiB")
	})
	writeTree(0)
	b.Run("cp-r-sync", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dst := filepath.Join(b.TempDir(), "copy")
			// The job's copies are durable when it ends (each is synced
			// before its record says so): the baseline syncs too.
			if out, err := exec.Command("cp", "-r", filepath.Join(s.root, "data"), dst).CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
			if out, err := exec.Command("sync", "-f", dst).CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "files/s")
	})
}

// BenchmarkJobSingleFile measures one-file premigrate jobs, submit to
// SUCCESS through the real path, polled every 5 ms; reported: the median
// and the 90th percentile in ms.
func BenchmarkJobSingleFile(b *testing.B) {
	for _, kind := range dbtest.Dialects(b) {
		b.Run(kind, func(b *testing.B) { benchJobSingleFile(b, kind) })
	}
}

func benchJobSingleFile(b *testing.B, kind string) {
	e := apitest.New(b, kind)
	e.StartHubWorker()
	s := newJobSiteB(b, e, "single")
	f := filepath.Join(s.root, "data", "one.txt")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	// At least 20 jobs make a median, whatever -benchtime says.
	rounds := max(b.N, benchSize(20, 1))
	for i := 0; i < rounds+1; i++ { // the first job warms the caches and is not counted
		if err := os.WriteFile(f, []byte(fmt.Sprint("round ", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, j := premigrateJob(b, e, "single", "/data/one.txt", 5*time.Millisecond); j["state"] != vocab.JobSuccess {
			b.Fatalf("job %v", j)
		}
		if i > 0 {
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "p90-ms")
}

// longestRun is the most history events any run of job id's workflow
// has (a run must stay under 10,240; the job continues as new before).
func longestRun(b *testing.B, e *apitest.Env, id int64) int64 {
	ctx := context.Background()
	var most int64
	var token []byte
	for {
		resp, err := e.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = 'job-%d'", id), NextPageToken: token})
		if err != nil {
			b.Fatal(err)
		}
		for _, ex := range resp.Executions {
			most = max(most, ex.HistoryLength)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return most
		}
	}
}

// peakRSS is the test process's peak resident memory (VmHWM): hub API,
// hub worker, site worker and the embedded Temporal server together, so
// a bound on it bounds the hub's.
func peakRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// premigrateJob submits a premigrate job of path at site and polls it
// every poll until it finishes; it returns the job's id and last state.
func premigrateJob(b *testing.B, e *apitest.Env, site, path string, poll time.Duration) (int64, map[string]any) {
	r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": site, "workflow": "premigrate",
		"paths": []string{path}, "fields": map[string]any{}})
	if r.Status != http.StatusCreated {
		b.Fatal(string(r.Body))
	}
	id := int64(r.Map()["job"].(float64))
	for {
		if j := jobState(e, id); vocab.JobFinished(j["state"].(string)) {
			return id, j
		}
		time.Sleep(poll)
	}
}
