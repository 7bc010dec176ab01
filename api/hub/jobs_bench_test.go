package hub_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

// jobBenchDB is one shape the job benchmarks run in: db is the hub's
// database (sqlite or postgres) and processes, when set, runs the site
// worker in a process of its own, as production does (`hub serve` with
// its hub worker here, `hub worker` at the site); otherwise the hub API,
// the hub worker and the site worker share the test process, as `hub dev`
// does. Temporal is the embedded test server either way.
type jobBenchDB struct {
	name, db  string
	processes bool
}

// jobBenchDBs are the shapes the job benchmarks run in: each database in
// one process, and PostgreSQL (when there is one) with the site worker in
// its own process, the two cases.
func jobBenchDBs(b *testing.B) []jobBenchDB {
	var out []jobBenchDB
	for _, kind := range dbtest.Dialects(b) {
		out = append(out, jobBenchDB{name: kind, db: kind})
		if kind == "postgres" {
			out = append(out, jobBenchDB{name: "postgres-processes", db: kind, processes: true})
		}
	}
	return out
}

// newBenchSite is newJobSiteB in the shape of d: with d.processes the
// site's worker runs in a child process, returned (nil otherwise), and
// newBenchSite returns once its first heartbeat is recorded, so that the
// child's start is not timed as the first job's work (an in-process
// worker is polling when StartSiteWorker returns).
func newBenchSite(b *testing.B, e *apitest.Env, name string, d jobBenchDB) (*jobSite, *os.Process) {
	if !d.processes {
		return newJobSiteB(b, e, name), nil
	}
	ctx := context.Background()
	s, err := models.EnsureSite(ctx, e.DB, name)
	if err != nil {
		b.Fatal(err)
	}
	js := &jobSite{e: e, name: name, root: b.TempDir(), targetDir: b.TempDir()}
	tgt := &models.ExternalTarget{Name: name + "-fs", StorageType: "filesystem", LocalFileRegex: ".*", Enabled: true}
	tgt.MigrationTargetFolder = js.targetDir
	if err := models.SaveExternalTarget(ctx, e.DB, tgt, []int64{s.ID}); err != nil {
		b.Fatal(err)
	}
	node := name + "-n1"
	proc := e.StartSiteWorkerProcess(worker.SiteConfig{Site: name, Queue: "default", Node: node,
		Root: js.root, HeartbeatInterval: time.Second})
	js.stopWorker = func() { _ = proc.Kill() }
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		up, err := e.DB.NewSelect().Model((*models.Node)(nil)).
			Where("name = ? AND last_heartbeat IS NOT NULL", node).Exists(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if up {
			return js, proc
		}
		if time.Now().After(deadline) {
			b.Fatalf("the site worker process of %s sent no heartbeat in a minute", name)
		}
	}
}

// BenchmarkJobPremigrate measures a whole premigrate job of 2,000 files of
// 4 KiB through the real path (API, Temporal, site worker, database) and,
// in the same iterations, alternating which goes first, `cp -r` of the
// same tree followed by `sync -f` (the baseline), so the ratio is
// meaningful on a noisy machine. Reported: files/s and cp-files/s.
//
// HUB_BENCH_JOB_FILES sets the number of files (e.g. 100000, the issue's
// case).
func BenchmarkJobPremigrate(b *testing.B) {
	for _, d := range jobBenchDBs(b) {
		b.Run(d.name, func(b *testing.B) { benchJobPremigrate(b, d) })
	}
}

// benchJobPremigrate is BenchmarkJobPremigrate in one shape (jobBenchDB).
func benchJobPremigrate(b *testing.B, d jobBenchDB) {
	n := dbtest.BenchSize(2000, 100)
	if v, err := strconv.Atoi(os.Getenv("HUB_BENCH_JOB_FILES")); err == nil && v > 0 {
		n = v
	}
	e := apitest.New(b, d.db)
	e.StartHubWorker()
	s, proc := newBenchSite(b, e, "bench", d)
	// Writing the files again makes them resident (a premigrated record
	// no longer matches a rewritten file), so each round does full work.
	// Every file has content of its own, as real files do (identical
	// files would share one remote copy).
	// writeTree ends with the tree on disk, so that neither the job nor
	// the cp baseline pays for writing back the other's files.
	writeTree := func(round int) {
		defer func() {
			if err := fsutil.SyncFS(s.root); err != nil {
				b.Fatal(err)
			}
		}()
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
	var job, cp time.Duration
	var maxEvents int64
	runJob := func() {
		start := time.Now()
		id, j := premigrateJob(b, e, "bench", "/data", 20*time.Millisecond)
		job += time.Since(start)
		if j["numprocessedfiles"].(float64) != float64(n) {
			b.Fatalf("job %v", j)
		}
		maxEvents = max(maxEvents, longestRun(b, e, id))
	}
	runCp := func() {
		dst := filepath.Join(b.TempDir(), "copy")
		start := time.Now()
		// The job's copies are durable when it ends (each is synced
		// before its record says so): the baseline syncs too.
		if out, err := exec.Command("cp", "-r", filepath.Join(s.root, "data"), dst).CombinedOutput(); err != nil {
			b.Fatal(err, string(out))
		}
		if out, err := exec.Command("sync", "-f", dst).CombinedOutput(); err != nil {
			b.Fatal(err, string(out))
		}
		cp += time.Since(start)
	}
	resetPeakRSS(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The last round's copies are moved aside, not deleted: nothing
		// is deleted until the end (see BenchmarkPremigrateSmallFiles).
		_ = os.Rename(s.targetDir, filepath.Join(b.TempDir(), "target"))
		if err := os.MkdirAll(s.targetDir, 0o755); err != nil {
			b.Fatal(err)
		}
		writeTree(i + 1)
		if i%2 == 0 {
			runJob()
			runCp()
		} else {
			runCp()
			runJob()
		}
	}
	b.ReportMetric(float64(n*b.N)/job.Seconds(), "files/s")
	b.ReportMetric(float64(n*b.N)/cp.Seconds(), "cp-files/s")
	b.ReportMetric(float64(maxEvents), "max-run-events")
	if proc == nil {
		b.ReportMetric(float64(peakRSS(b, "self"))/(1<<20), "peak-rss-MiB")
	} else {
		// The worker process is alive until the benchmark ends.
		b.ReportMetric(float64(peakRSS(b, "self"))/(1<<20), "hub-peak-rss-MiB")
		b.ReportMetric(float64(peakRSS(b, strconv.Itoa(proc.Pid)))/(1<<20), "worker-peak-rss-MiB")
	}
}

// BenchmarkJobSingleFile measures one-file premigrate jobs, submit to
// SUCCESS through the real path, polled every 5 ms; reported: the median
// and the 90th percentile in ms.
func BenchmarkJobSingleFile(b *testing.B) {
	for _, d := range jobBenchDBs(b) {
		b.Run(d.name, func(b *testing.B) { benchJobSingleFile(b, d) })
	}
}

func benchJobSingleFile(b *testing.B, d jobBenchDB) {
	e := apitest.New(b, d.db)
	e.StartHubWorker()
	s, _ := newBenchSite(b, e, "single", d)
	f := filepath.Join(s.root, "data", "one.txt")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	// At least 20 jobs make a median, whatever -benchtime says.
	rounds := max(b.N, dbtest.BenchSize(20, 1))
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
// has (a run must stay under 10,240; the job continues as new before). It
// reads the histories themselves, from the last run back through each
// run's predecessor, rather than the visibility listing, which may not
// have caught up when the job ends.
func longestRun(b *testing.B, e *apitest.Env, id int64) int64 {
	ctx := context.Background()
	var most int64
	for runID := ""; ; {
		var n int64
		previous := ""
		it := e.Temporal.GetWorkflowHistory(ctx, fmt.Sprintf("job-%d", id), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			if n++; n == 1 {
				previous = ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
			}
		}
		most = max(most, n)
		if previous == "" {
			return most
		}
		runID = previous
	}
}

// peakRSS is the peak resident memory (VmHWM) of process pid ("self":
// the test process). The test process holds the hub API, the hub worker,
// the embedded Temporal server and, unless it runs in a process of its
// own, the site worker, so a bound on its peak bounds the hub's.
func peakRSS(b *testing.B, pid string) int64 {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no VmHWM in /proc/%s/status", pid)
	return 0
}

// resetPeakRSS returns the test process's garbage to the system and
// resets its VmHWM to what it holds now, so that peakRSS measures this
// benchmark rather than the ones that ran before it in the process (the
// other databases' shapes); what stays resident (the embedded Temporal
// server, say) still counts, as it did for them.
func resetPeakRSS(b *testing.B) {
	debug.FreeOSMemory()
	// "5" resets the peak RSS (proc(5), /proc/pid/clear_refs).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
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
