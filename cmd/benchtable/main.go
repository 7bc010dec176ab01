// Command benchtable reads `go test -bench` output on stdin and prints the
// one table `make bench` reports: each figure beside its baseline from the
// same run, their ratio and the goal (docs/performance.md).
//
//	go test -run '^$' -bench . ./activities/site ./api/hub ./api/cj | go run ./cmd/benchtable
//
// With -all it fails when the input has a failed test or lacks a row's
// benchmarks: `make test` runs every benchmark at a small size through it,
// so a benchmark that breaks or is renamed fails the suite.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ref names one figure of the output: a benchmark (without its -N
// suffix) and a unit it reported.
type ref struct{ bench, unit string }

// row is one line of the table. Ratio is figure/baseline when rate is set
// (higher is better: files/s), else baseline/figure (times: how many times
// as fast as the baseline); goal, when set, is the least ratio wanted, or
// for a row without baseline the most the figure may be; most, when set,
// is the most the figure may be whatever its ratio.
type row struct {
	most      float64
	what      string
	fig, base ref
	rate      bool
	goal      float64
	goalText  string
}

func lists(db string) []row {
	hello := ref{"BenchmarkLists/" + db + "/gin-hello", "ms/req"}
	list := func(name, what string, goal float64, text string) row {
		return row{what: what + " (" + db + ")", fig: ref{"BenchmarkLists/" + db + "/" + name, "ms/req"}, base: hello, goal: goal, goalText: text}
	}
	// Throughput: the baseline (gin hello at 51,400 req/s on two
	// cores) was measured by a load driver with clients at once, faster
	// than one client can ask; these rows measure the lists the same way.
	loaded := func(name, what string, goal float64, text string) row {
		return row{what: what + ", 8 clients at once, vs gin hello with 8 clients (" + db + ")",
			fig: ref{"BenchmarkLists/" + db + "/" + name + "-8-clients", "ms/req"}, base: ref{"BenchmarkLists/" + db + "/gin-hello-8-clients", "ms/req"}, goal: goal, goalText: text}
	}
	return []row{
		list("gin-jobs-page-bytes", "gin writing the bytes of a jobs page (the floor) vs gin hello", 0, ""),
		list("gin-hello-select1", "gin hello after one SELECT 1 through the hub's pool (the floor under a list that must read the database once) vs gin hello", 0, ""),
		list("sites", "GET /api/sites/ vs gin hello world", 0.25, "≥ 25% (one client)"),
		{what: "GET /api/sites/ vs gin hello after one SELECT 1 (" + db + ")",
			fig: ref{"BenchmarkLists/" + db + "/sites", "ms/req"}, base: ref{"BenchmarkLists/" + db + "/gin-hello-select1", "ms/req"}},
		list("jobs-page-100", "GET /api/jobs/?page_size=100 vs gin hello", 0.25, "≥ 25% (one client)"),
		list("jobs-page-100-last", "GET /api/jobs/ last page vs gin hello", 0, ""),
		list("jobs-page-100-state", "GET /api/jobs/?state=SUCCESS (every job) vs gin hello", 0, ""),
		list("jobs-page-100-site", "GET /api/jobs/?site=NAME (999 jobs of every 1,000) vs gin hello", 0, ""),
		list("jobs-page-100-site-small", "GET /api/jobs/?site=NAME (a site of every 1,000th job, a user's) vs gin hello", 0, ""),
		list("jobs-recent-site", "GET /api/jobs/recent/?site=NAME (999 jobs of every 1,000) vs gin hello", 0, ""),
		list("jobs-stats", "GET /api/jobs/stats/ (every job's summary) vs gin hello", 0, ""),
		list("jobstats-page-100", "GET /api/jobstats/?job=N&page_size=100 vs gin hello", 0.10, "≥ 10% (one client)"),
		list("jobstats-page-100-success", "GET /api/jobstats/?job=N&state=SUCCESS (999 paths of every 1,000) vs gin hello", 0, ""),
		list("jobstats-page-100-failed", "GET /api/jobstats/?job=N&state=FAILURE (every 1,000th path) vs gin hello", 0, ""),
		list("job-statistics", "GET /api/jobs/N/statistics/ (100,000 paths; 1M with LARGE=1) vs gin hello", 0, ""),
		list("jobstats-page-100-last", "GET /api/jobstats/?job=N last page vs gin hello", 0, ""),
		list("tasks-page-100", "GET /api/tasks/?page_size=100 vs gin hello", 0.25, "≥ 25% (one client)"),
		list("tasks-page-100-state", "GET /api/tasks/?state=SUCCESS (every task) vs gin hello", 0, ""),
		list("tasks-page-100-last", "GET /api/tasks/ last page vs gin hello", 0, ""),
		list("jobs-page-100-changing", "GET /api/jobs/?page_size=100, another job changed before each request (no page kept), vs gin hello", 0, ""),
		list("tasks-page-100-changing", "GET /api/tasks/?page_size=100, a job changed before each request (no page kept), vs gin hello", 0, ""),
		list("jobstats-page-100-changing", "GET /api/jobstats/?job=N&page_size=100, a job changed before each request (no page kept), vs gin hello", 0, ""),
		loaded("sites", "GET /api/sites/", 0.25, "≥ 25% (req/s)"),
		loaded("jobs-page-100", "GET /api/jobs/?page_size=100", 0.25, "≥ 25% (req/s)"),
		loaded("tasks-page-100", "GET /api/tasks/?page_size=100", 0.25, "≥ 25% (req/s)"),
		loaded("jobstats-page-100", "GET /api/jobstats/?job=N&page_size=100", 0.10, "≥ 10% (req/s)"),
	}
}

// jobs are the job rows of one shape the job benchmarks run in (a
// database, or "postgres-processes": the site worker in its own process),
// labelled label.
func jobs(db, label string) []row {
	job := "BenchmarkJobPremigrate/" + db
	return []row{
		{what: "premigrate job, submit → SUCCESS vs cp -r + sync (files/s, " + label + ")",
			fig: ref{job, "files/s"}, base: ref{job, "cp-files/s"}, rate: true, goal: 0.5, goalText: "≥ 0.5×"},
		{what: "single-file job, submit → SUCCESS, p50 (ms, " + label + ")",
			fig: ref{"BenchmarkJobSingleFile/" + db, "p50-ms"}, goal: 150, goalText: "≤ 150 ms"},
	}
}

// cjSpace is the C+J space row of one database.
func cjSpace(db string) row {
	return row{what: "C+J space create → ACTIVE, p50 (ms, " + db + ")",
		fig: ref{"BenchmarkCJSpaceCreate/" + db, "p50-ms"}, goal: 250, goalText: "≤ 250 ms (keep)"}
}

// jobRows are the job rows: each database with the whole hub in one
// process (`hub dev`), and PostgreSQL with the site worker in a process of
// its own (`hub serve` + `hub worker`).
var jobRows = slices.Concat(jobs("sqlite", "sqlite"), jobs("postgres", "postgres"),
	jobs("postgres-processes", "postgres, hub serve + hub worker processes"))

var rows = slices.Concat(jobRows, []row{cjSpace("sqlite"), cjSpace("postgres")}, []row{
	{what: "premigrate step (library) vs cp -r",
		fig: ref{"BenchmarkPremigrateSmallFiles", "step-ms/op"}, base: ref{"BenchmarkPremigrateSmallFiles", "cp-ms/op"}, goal: 1, goalText: "≥ 1× (keep)"},
	{what: "migrate step (library): premigrate and release 2,000 files of 4 KiB, vs cp -r",
		fig: ref{"BenchmarkMigrateSmallFiles", "migrate-ms/op"}, base: ref{"BenchmarkMigrateSmallFiles", "cp-ms/op"}},
	{what: "migrate step with its release lease vs without",
		fig: ref{"BenchmarkMigrateSmallFiles", "migrate-ms/op"}, base: ref{"BenchmarkMigrateSmallFiles", "nolease-ms/op"}},
	{what: "C+J snapshot of a space of 2,000 small files, a tenth of them stubs, vs cp -r",
		fig: ref{"BenchmarkSnapshot", "snapshot-ms/op"}, base: ref{"BenchmarkSnapshot", "cp-ms/op"}},
	{what: "send's receive (hydrate) of 2,000 files of 4 KiB with its flush, vs cp -r + sync -f",
		fig: ref{"BenchmarkReceive", "receive-ms/op"}, base: ref{"BenchmarkReceive", "cp-ms/op"}},
	{what: "send's receive with its flush vs without it",
		fig: ref{"BenchmarkReceive", "receive-ms/op"}, base: ref{"BenchmarkReceive", "noflush-ms/op"}},
	{what: "filesystem target Put of 2,000 new objects of 4 KiB (unnamed file, linked) vs through temporary names",
		fig: ref{"BenchmarkFilesystemPut", "put-ms/op"}, base: ref{"BenchmarkFilesystemPut", "named-ms/op"}},
	{what: "S3 single-part Put of 8 MiB (checked before it is sent) vs the SDK's PutObject, in-process S3",
		fig: ref{"BenchmarkS3Put/hub", "ns/op"}, base: ref{"BenchmarkS3Put/sdk", "ns/op"}},
	{what: "scrub of a filesystem target, 2,000 objects of 64 KiB, vs find | xargs sha256sum",
		fig: ref{"BenchmarkScrub/hub", "ns/op"}, base: ref{"BenchmarkScrub/sha256sum", "ns/op"}},
	{what: "discovery walk of a tree walked before vs find -printf '%s %T@' (2,000 files; 1M with LARGE=1)",
		fig: ref{"BenchmarkWalk", "ns/op"}, base: ref{"BenchmarkFind", "ns/op"}, goal: 1, goalText: "≥ 1×"},
	{what: "policy scan vs find -printf '%s %T@'",
		fig: ref{"BenchmarkPolicyScan/hub", "ns/op"}, base: ref{"BenchmarkPolicyScan/find", "ns/op"}, goal: 1, goalText: "≥ 1×"},
	{what: "collection of a filesystem target, 100,000 contents all referenced, vs find -printf '%s %T@ %P'",
		fig: ref{"BenchmarkCollect/hub", "ns/op"}, base: ref{"BenchmarkCollect/find", "ns/op"}},
	{what: "schedule firing → job STARTED vs POST /file/workflow/ → STARTED",
		fig: ref{"BenchmarkScheduleFiringToJobStarted/schedule-firing", "ns/op"}, base: ref{"BenchmarkScheduleFiringToJobStarted/post-file-workflow", "ns/op"}},
	{what: "name search over 1M indexed files, first page of 1,000, common name vs raw count",
		fig: ref{"BenchmarkFileIndexSearch1M/query-common", "ns/op"}, base: ref{"BenchmarkFileIndexSearch1M/baseline-raw-count-common", "ns/op"},
		most: 1e9, goalText: "< 1 s"},
	{what: "name search over 1M indexed files, no match (a full pass) vs raw count",
		fig: ref{"BenchmarkFileIndexSearch1M/query-none", "ns/op"}, base: ref{"BenchmarkFileIndexSearch1M/baseline-raw-count-none", "ns/op"},
		most: 1e9, goalText: "< 1 s"},
	{what: "analytics answer vs du -s (ms)",
		fig: ref{"BenchmarkAnalytics100k", "analytics-ms/op"}, base: ref{"BenchmarkAnalytics100k", "du-ms/op"}},
}, lists("sqlite"), lists("postgres"))

// benchLine is "BenchmarkName-N  iterations  value unit  value unit ...".
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parse(r io.Reader) (map[ref]float64, []string, error) {
	figs := map[ref]float64{}
	var failed []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "panic:") {
			failed = append(failed, line)
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				figs[ref{m[1], f[i+1]}] = v
			}
		}
	}
	return figs, failed, sc.Err()
}

// show prints a figure in its unit, times in ms.
func show(v float64, unit string) string {
	switch unit {
	case "ns/op":
		return strconv.FormatFloat(v/1e6, 'f', 3, 64) + " ms"
	case "ms/req":
		return strconv.FormatFloat(v, 'f', 3, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + strings.TrimSuffix(unit, "/op")
}

func main() {
	all := flag.Bool("all", false, "fail on a failed test or a row whose benchmarks are missing")
	title := flag.String("title", "", "a line printed above the table")
	flag.Parse()
	figs, failed, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	if *title != "" {
		fmt.Println(*title)
		fmt.Println()
	}
	fmt.Println("| what | figure | baseline | ratio | goal | met |")
	fmt.Println("|---|---|---|---|---|---|")
	var missing []string
	for _, r := range rows {
		r.what = strings.ReplaceAll(r.what, "|", `\|`) // a cell of a Markdown table
		fig, ok := figs[r.fig]
		if !ok {
			missing = append(missing, r.fig.bench)
			fmt.Printf("| %s | not run | | | %s | |\n", r.what, r.goalText)
			continue
		}
		base, ratio, met := "—", "—", ""
		if r.base.bench != "" {
			b, ok := figs[r.base]
			if !ok {
				missing = append(missing, r.base.bench)
				fmt.Printf("| %s | %s | not run | | %s | |\n", r.what, show(fig, r.fig.unit), r.goalText)
				continue
			}
			base = show(b, r.base.unit)
			x := b / fig
			if r.rate {
				x = fig / b
			}
			ratio = strconv.FormatFloat(x, 'f', 3, 64) + "×"
			if r.goal > 0 {
				met = yesNo(x >= r.goal)
			}
		} else if r.goal > 0 {
			met = yesNo(fig <= r.goal)
		}
		if r.most > 0 {
			met = yesNo(fig < r.most)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.what, show(fig, r.fig.unit), base, ratio, r.goalText, met)
	}
	if *all && (len(failed) > 0 || len(missing) > 0) {
		fmt.Fprintf(os.Stderr, "benchtable: failed: %q; benchmarks missing: %q\n", failed, missing)
		os.Exit(1)
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
