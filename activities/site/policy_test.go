package site

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/thehub/hub/workflows/vocab"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"12h", 12 * time.Hour}, {"90d", 90 * day}, {"2w", 14 * day}, {"3m", 90 * day},
		{"1y", 365 * day}, {"30", 30 * day}, {"0d", 0}, {"0", 0},
	} {
		got, err := ParseAge(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "d", "-1d", "1.5d", " 1d", "1d ", "1D", "1s", "1min", "d1", "+3", "1dd", "99999999999999y"} {
		_, err := ParseAge(bad)
		require.Error(t, err, "%q", bad)
		require.Contains(t, err.Error(), "a whole number followed by h, d, w, m or y", bad)
	}
}

// policyFixture is one file of a generated tree: its size and how long
// ago it was last read and modified.
type policyFixture struct {
	path            string
	size            int
	atimeAge, mtAge time.Duration
}

const day = 24 * time.Hour

// policyTree is a tree with chosen names, sizes and ages, plus things a
// scan must never select: a symlink to a matching file, a directory with
// a matching name, and the hub's own folder.
var policyTree = []policyFixture{
	{"/a.pdf", 100, 10 * day, 400 * day},
	{"/b.PDF", 2000, 100 * day, 5 * day},
	{"/c.txt", 50, 400 * day, 100 * day},
	{"/d.tar.gz", 5000, 1 * day, 1 * day},
	{"/e.log", 300, 40 * day, 40 * day},
	{"/sub/f.pdf", 700, 200 * day, 2 * day},
	{"/sub/g.txt", 10, 3 * day, 300 * day},
}

func writePolicyTree(t *testing.T, dir string, now time.Time, files []policyFixture) {
	t.Helper()
	for _, f := range files {
		abs := filepath.Join(dir, filepath.FromSlash(f.path))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, make([]byte, f.size), 0o644))
		require.NoError(t, os.Chtimes(abs, now.Add(-f.atimeAge), now.Add(-f.mtAge)))
	}
}

// policyActivities is a site over a fresh root holding files, whose clock
// reads now and whose pools measure as the returned map says.
func policyActivities(t *testing.T, now time.Time, files []policyFixture) (*Activities, map[string][2]int64) {
	t.Helper()
	return policyActivitiesOn(t, now, files, false)
}

// policyActivitiesOn is policyActivities with the state kept in the index
// rather than in extended attributes when indexState is set.
func policyActivitiesOn(t *testing.T, now time.Time, files []policyFixture, indexState bool) (*Activities, map[string][2]int64) {
	t.Helper()
	dir := t.TempDir()
	writePolicyTree(t, dir, now, files)
	require.NoError(t, os.Symlink("a.pdf", filepath.Join(dir, "link.pdf")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dir.pdf"), 0o755))
	pools := map[string][2]int64{}
	a := &Activities{Root: newRoot(t, dir, indexState), Site: "west",
		Now: func() time.Time { return now },
		Utilisation: func(_ context.Context, pool string) (int64, int64, error) {
			m, ok := pools[pool]
			if !ok {
				return 0, 0, errors.New("no such pool in the test")
			}
			return m[0], m[1], nil
		}}
	// The hub's own files are never selected.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, hubDir, "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, hubDir, "x", "h.pdf"), []byte("x"), 0o644))
	return a, pools
}

// discover runs the Discover activity as Temporal runs it (heartbeats
// included), its log silenced: errors are returned.
func discover(t testing.TB, a *Activities, in DiscoverInput) (*DiscoverOutput, error) {
	t.Helper()
	var out DiscoverOutput
	if err := runActivity(a, a.Discover, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// receive runs the Receive activity, which must not fail as a whole.
func receive(t testing.TB, a *Activities, in ReceiveInput) *StepOutput {
	t.Helper()
	var out StepOutput
	require.NoError(t, runActivity(a, a.Receive, in, &out))
	return &out
}

// runActivity runs one of a's activities in the SDK's test environment
// and decodes its result into out.
func runActivity(a *Activities, fn, in, out any) error {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	val, err := env.ExecuteActivity(fn, in)
	if err != nil {
		return err
	}
	return val.Get(out)
}

// batchedPaths reads the written batches back: the paths of each rule in
// the order the batches hold them.
func batchedPaths(t *testing.T, a *Activities, in DiscoverInput, out *DiscoverOutput) map[int][]string {
	t.Helper()
	got := map[int][]string{}
	for i, b := range out.Batches {
		require.Equal(t, in.FirstBatch+i, b.Index, "batches are numbered in order")
		entries, err := readBatch(batchFile(a.jobDir(in.JobID, in.Run), b.Index, b.Attempt))
		require.NoError(t, err)
		require.Len(t, entries, b.N)
		for _, e := range entries {
			require.Equal(t, TypeFile, e.Type)
			got[b.Rule] = append(got[b.Rule], e.Path)
		}
	}
	return got
}

func policyRun(t *testing.T, a *Activities, sel PolicySelect, batchSize int) ([]string, *DiscoverOutput) {
	t.Helper()
	in := DiscoverInput{JobID: 7, Run: 1, Mode: "policy", Paths: []string{"/"}, BatchSize: batchSize, Policy: &sel}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	got := batchedPaths(t, a, in, out)
	require.Empty(t, got[PolicyRulePremigrate], "no triggers, no premigration band")
	return got[PolicyRuleAction], out
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestPolicyConditionGroups(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, _ := policyActivities(t, now, policyTree)
	older := func(field, age string) DateCondition {
		return DateCondition{Field: field, OlderOrNewer: "older", Age: age, Include: true}
	}
	newer := func(field, age string) DateCondition {
		return DateCondition{Field: field, OlderOrNewer: "newer", Age: age, Include: true}
	}
	all := []string{"/a.pdf", "/b.PDF", "/c.txt", "/d.tar.gz", "/e.log", "/sub/f.pdf", "/sub/g.txt"}
	for _, tc := range []struct {
		name   string
		groups []PolicyGroup
		want   []string
	}{
		{"no groups select every file", nil, all},
		{"atime older", []PolicyGroup{{Dates: []DateCondition{older("atime", "30d")}}},
			[]string{"/b.PDF", "/c.txt", "/e.log", "/sub/f.pdf"}},
		{"mtime older", []PolicyGroup{{Dates: []DateCondition{older("mtime", "30d")}}},
			[]string{"/a.pdf", "/c.txt", "/e.log", "/sub/g.txt"}},
		{"atime newer", []PolicyGroup{{Dates: []DateCondition{newer("atime", "30d")}}},
			[]string{"/a.pdf", "/d.tar.gz", "/sub/g.txt"}},
		{"mtime newer in weeks", []PolicyGroup{{Dates: []DateCondition{newer("mtime", "1w")}}},
			[]string{"/b.PDF", "/d.tar.gz", "/sub/f.pdf"}},
		{"atime older in months and years", []PolicyGroup{{Dates: []DateCondition{older("atime", "6m"), newer("atime", "1y")}}},
			[]string{"/sub/f.pdf"}},
		{"hours", []PolicyGroup{{Dates: []DateCondition{newer("mtime", "36h")}}}, []string{"/d.tar.gz"}},
		{"a bare number is days", []PolicyGroup{{Dates: []DateCondition{older("atime", "150")}}},
			[]string{"/c.txt", "/sub/f.pdf"}},
		{"negated date", []PolicyGroup{{Dates: []DateCondition{{Field: "mtime", OlderOrNewer: "older", Age: "30d", Include: false}}}},
			[]string{"/b.PDF", "/d.tar.gz", "/sub/f.pdf"}},
		{"size greater", []PolicyGroup{{Sizes: []SizeCondition{{GreaterOrLess: "greater", Size: 300, Include: true}}}},
			[]string{"/b.PDF", "/d.tar.gz", "/sub/f.pdf"}},
		{"size less", []PolicyGroup{{Sizes: []SizeCondition{{GreaterOrLess: "less", Size: 100, Include: true}}}},
			[]string{"/c.txt", "/sub/g.txt"}},
		{"negated size", []PolicyGroup{{Sizes: []SizeCondition{{GreaterOrLess: "greater", Size: 300, Include: false}}}},
			[]string{"/a.pdf", "/c.txt", "/e.log", "/sub/g.txt"}},
		{"AND inside a group", []PolicyGroup{{
			Dates: []DateCondition{older("atime", "30d")},
			Sizes: []SizeCondition{{GreaterOrLess: "greater", Size: 500, Include: true}}}},
			[]string{"/b.PDF", "/sub/f.pdf"}},
		{"AND of all three kinds", []PolicyGroup{{
			Dates: []DateCondition{older("atime", "30d")},
			Sizes: []SizeCondition{{GreaterOrLess: "less", Size: 1000, Include: true}},
			Types: []FileTypeCondition{{FileTypes: []string{"pdf"}, Include: true}}}},
			[]string{"/sub/f.pdf"}},
		{"OR across groups", []PolicyGroup{
			{Types: []FileTypeCondition{{FileTypes: []string{"pdf"}, Include: true}}},
			{Sizes: []SizeCondition{{GreaterOrLess: "less", Size: 60, Include: true}}}},
			[]string{"/a.pdf", "/b.PDF", "/c.txt", "/sub/f.pdf", "/sub/g.txt"}},
		{"types case-insensitive with a dot", []PolicyGroup{{Types: []FileTypeCondition{{FileTypes: []string{".PDF"}, Include: true}}}},
			[]string{"/a.pdf", "/b.PDF", "/sub/f.pdf"}},
		{"multi-dot type", []PolicyGroup{{Types: []FileTypeCondition{{FileTypes: []string{"TAR.GZ"}, Include: true}}}},
			[]string{"/d.tar.gz"}},
		{"last extension", []PolicyGroup{{Types: []FileTypeCondition{{FileTypes: []string{"gz", "log"}, Include: true}}}},
			[]string{"/d.tar.gz", "/e.log"}},
		{"negated types", []PolicyGroup{{Types: []FileTypeCondition{{FileTypes: []string{".txt", "log"}, Include: false}}}},
			[]string{"/a.pdf", "/b.PDF", "/d.tar.gz", "/sub/f.pdf"}},
		{"negated type AND date", []PolicyGroup{{
			Dates: []DateCondition{older("mtime", "30d")},
			Types: []FileTypeCondition{{FileTypes: []string{"txt"}, Include: false}}}},
			[]string{"/a.pdf", "/e.log"}},
		{"no file matches", []PolicyGroup{{Sizes: []SizeCondition{{GreaterOrLess: "greater", Size: 1 << 30, Include: true}}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out := policyRun(t, a, PolicySelect{Groups: tc.groups, OrderBy: "path"}, 0)
			require.Equal(t, tc.want, got)
			require.True(t, out.Fired)
			require.EqualValues(t, len(tc.want), out.Files)
		})
	}
}

func TestPolicyOrder(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, _ := policyActivities(t, now, policyTree)
	rev := func(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }
	byAtime := []string{"/c.txt", "/sub/f.pdf", "/b.PDF", "/e.log", "/a.pdf", "/sub/g.txt", "/d.tar.gz"}
	byMtime := []string{"/a.pdf", "/sub/g.txt", "/c.txt", "/e.log", "/b.PDF", "/sub/f.pdf", "/d.tar.gz"}
	bySize := []string{"/sub/g.txt", "/c.txt", "/a.pdf", "/e.log", "/sub/f.pdf", "/b.PDF", "/d.tar.gz"}
	byPath := []string{"/a.pdf", "/b.PDF", "/c.txt", "/d.tar.gz", "/e.log", "/sub/f.pdf", "/sub/g.txt"}
	for _, tc := range []struct {
		by      string
		reverse bool
		want    []string
	}{
		{"", false, byAtime}, {"atime", false, byAtime}, {"atime", true, rev(byAtime)},
		{"mtime", false, byMtime}, {"mtime", true, rev(byMtime)},
		{"size", false, bySize}, {"size", true, rev(bySize)},
		{"path", false, byPath}, {"path", true, rev(byPath)},
	} {
		t.Run(tc.by+map[bool]string{true: "-reverse"}[tc.reverse], func(t *testing.T) {
			// Batches of two: the order holds across batch files.
			got, out := policyRun(t, a, PolicySelect{OrderBy: tc.by, Reverse: tc.reverse}, 2)
			require.Equal(t, tc.want, got)
			require.Len(t, out.Batches, 4)
		})
	}
}

// TestPolicyOrderTies: files with the same key are in path order, either
// way round.
func TestPolicyOrderTies(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, _ := policyActivities(t, now, []policyFixture{
		{"/t/z", 5, day, day}, {"/t/b", 5, day, day}, {"/t/m", 5, day, day}, {"/t/big", 9, 2 * day, 2 * day},
	})
	for _, reverse := range []bool{false, true} {
		got, _ := policyRun(t, a, PolicySelect{OrderBy: "size", Reverse: reverse, Groups: []PolicyGroup{
			{Types: []FileTypeCondition{{FileTypes: []string{"pdf"}, Include: false}}}}}, 0)
		if reverse {
			require.Equal(t, []string{"/t/big", "/t/b", "/t/m", "/t/z"}, got)
		} else {
			require.Equal(t, []string{"/t/b", "/t/m", "/t/z", "/t/big"}, got)
		}
	}
}

// TestPolicyCtime: ctime cannot be set, so the files are made one after
// the other and the clock is placed between them.
func TestPolicyCtime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctimes := map[string]time.Time{}
	for i, name := range []string{"z", "y", "x"} {
		abs := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(abs, []byte(name), 0o644))
		// The atimes say the opposite of the ctimes, so a scan that read
		// the wrong time would fail.
		old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(i) * time.Hour)
		require.NoError(t, os.Chtimes(abs, old, old))
		var st syscall.Stat_t
		for {
			require.NoError(t, syscall.Lstat(abs, &st))
			// File times come from the kernel's coarse clock (a tick of a
			// few ms): wait for the next tick before the next file.
			if _, c := accessChangeTimes(&st); time.Since(c) > 20*time.Millisecond {
				break
			}
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, syscall.Lstat(abs, &st))
		_, ctimes[name] = accessChangeTimes(&st)
	}
	require.True(t, ctimes["z"].Before(ctimes["y"]) && ctimes["y"].Before(ctimes["x"]), "%v", ctimes)
	now := ctimes["y"].Add(time.Hour) // y's ctime is exactly one hour old
	a := &Activities{Root: newRoot(t, dir, false), Now: func() time.Time { return now }}
	run := func(sel PolicySelect) []string {
		got, _ := policyRun(t, a, sel, 0)
		return got
	}
	require.Equal(t, []string{"/x", "/y", "/z"}, run(PolicySelect{OrderBy: "atime"}), "the atimes run the other way")
	require.Equal(t, []string{"/z", "/y", "/x"}, run(PolicySelect{OrderBy: "ctime"}))
	require.Equal(t, []string{"/x", "/y", "/z"}, run(PolicySelect{OrderBy: "ctime", Reverse: true}))
	require.Equal(t, []string{"/z"}, run(PolicySelect{OrderBy: "ctime", Groups: []PolicyGroup{
		{Dates: []DateCondition{{Field: "ctime", OlderOrNewer: "older", Age: "1h", Include: true}}}}}))
	require.Equal(t, []string{"/y", "/x"}, run(PolicySelect{OrderBy: "ctime", Groups: []PolicyGroup{
		{Dates: []DateCondition{{Field: "ctime", OlderOrNewer: "newer", Age: "1h", Include: true}}}}}))
	require.Equal(t, []string{"/z", "/y", "/x"}, run(PolicySelect{OrderBy: "ctime", Groups: []PolicyGroup{
		{Dates: []DateCondition{{Field: "atime", OlderOrNewer: "older", Age: "1y", Include: true}}}}}))
}

// tenFiles are ten files of 100 bytes, /f0 the oldest read.
func tenFiles() []policyFixture {
	var files []policyFixture
	for i := range 10 {
		files = append(files, policyFixture{"/p/f" + string(rune('0'+i)), 100, time.Duration(100-i) * day, day})
	}
	return files
}

func policyCut(t *testing.T, a *Activities, sel PolicySelect) (action, premigrate []string, out *DiscoverOutput) {
	t.Helper()
	in := DiscoverInput{JobID: 9, Run: 1, Mode: "policy", Paths: []string{"/p"}, BatchSize: 3, Policy: &sel}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	got := batchedPaths(t, a, in, out)
	return got[PolicyRuleAction], got[PolicyRulePremigrate], out
}

func TestPolicyTriggers(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, pools := policyActivities(t, now, tenFiles())
	pools["fast"] = [2]int64{900, 1000} // 90% full
	pools["slow"] = [2]int64{850, 1000} // 85% full
	pools["empty"] = [2]int64{0, 0}
	f := func(is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, "/p/f"+string(rune('0'+i)))
		}
		return out
	}

	t.Run("stops at the lower threshold and premigrates down to its own", func(t *testing.T) {
		action, premig, out := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "fast", Upper: 80, Lower: 50, Premigrate: 30}}})
		// 900 − 500 = 400 bytes to free: four files; then 900 − 300 = 600: two more.
		require.Equal(t, f(0, 1, 2, 3), action)
		require.Equal(t, f(4, 5), premig)
		require.True(t, out.Fired)
		require.Equal(t, []PoolUtilisation{{Pool: "fast", Used: 900, Total: 1000, Percent: 90, Above: true}}, out.Utilisation)
		// Batches of three never mix the two rules.
		require.Equal(t, []BatchMeta{{0, 0, 3, 0}, {1, 0, 1, 0}, {2, 1, 2, 0}}, out.Batches)
	})
	t.Run("reverse order takes the newest first", func(t *testing.T) {
		action, premig, _ := policyCut(t, a, PolicySelect{Reverse: true, Triggers: []PolicyTrigger{{Pool: "fast", Upper: 80, Lower: 50, Premigrate: 30}}})
		require.Equal(t, f(9, 8, 7, 6), action)
		require.Equal(t, f(5, 4), premig)
	})
	t.Run("a cut between files takes the file that crosses it", func(t *testing.T) {
		action, premig, _ := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "fast", Upper: 80, Lower: 55.5, Premigrate: 55.5}}})
		// 900 − 555 = 345 bytes: three files free 300, the fourth crosses.
		require.Equal(t, f(0, 1, 2, 3), action)
		require.Empty(t, premig, "premigrate not below lower: no band")
	})
	t.Run("premigrate above lower is no band", func(t *testing.T) {
		action, premig, _ := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "fast", Upper: 80, Lower: 70, Premigrate: 75}}})
		require.Equal(t, f(0, 1), action)
		require.Empty(t, premig)
	})
	t.Run("not above upper: no batches", func(t *testing.T) {
		action, premig, out := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "fast", Upper: 90, Lower: 10}}})
		require.Empty(t, action)
		require.Empty(t, premig)
		require.False(t, out.Fired)
		require.Empty(t, out.Batches)
		require.Equal(t, []PoolUtilisation{{Pool: "fast", Used: 900, Total: 1000, Percent: 90}}, out.Utilisation)
		entries, err := os.ReadDir(a.jobDir(9, 1))
		require.NoError(t, err)
		require.Empty(t, entries)
	})
	t.Run("an empty pool never fires", func(t *testing.T) {
		_, _, out := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "empty", Upper: 0, Lower: 0}}})
		require.False(t, out.Fired)
	})
	t.Run("the largest amount of the triggers that fired wins", func(t *testing.T) {
		action, premig, out := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{
			{Pool: "fast", Upper: 80, Lower: 70, Premigrate: 60}, // frees 200, premigrates to 300
			{Pool: "slow", Upper: 80, Lower: 40, Premigrate: 40}, // frees 450
			{Pool: "fast", Upper: 95, Lower: 0, Premigrate: 0},   // not above upper: ignored
		}})
		require.Equal(t, f(0, 1, 2, 3, 4), action)
		require.Empty(t, premig)
		require.Len(t, out.Utilisation, 3)
		require.False(t, out.Utilisation[2].Above)
	})
	t.Run("more to free than selected takes every file", func(t *testing.T) {
		action, premig, _ := policyCut(t, a, PolicySelect{
			Groups:   []PolicyGroup{{Dates: []DateCondition{{Field: "atime", OlderOrNewer: "older", Age: "95d", Include: true}}}},
			Triggers: []PolicyTrigger{{Pool: "fast", Upper: 10, Lower: 5, Premigrate: 0}}})
		require.Equal(t, f(0, 1, 2, 3, 4), action)
		require.Empty(t, premig)
	})
	t.Run("conditions still select", func(t *testing.T) {
		action, premig, _ := policyCut(t, a, PolicySelect{
			Groups:   []PolicyGroup{{Dates: []DateCondition{{Field: "atime", OlderOrNewer: "older", Age: "97d", Include: false}}}},
			Triggers: []PolicyTrigger{{Pool: "fast", Upper: 80, Lower: 50, Premigrate: 30}}})
		require.Equal(t, f(3, 4, 5, 6), action)
		require.Equal(t, f(7, 8), premig)
	})
}

// TestPolicyMigratedFilesDoNotCount: a stub frees nothing, so it never
// counts toward the amount; the policy's states decide whether it is
// selected at all.
func TestPolicyMigratedFilesDoNotCount(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"xattr", "index"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testPolicyMigratedFiles(t, backend == "index")
		})
	}
}

func testPolicyMigratedFiles(t *testing.T, indexState bool) {
	now := time.Now()
	files := tenFiles()
	a, pools := policyActivitiesOn(t, now, files, indexState)
	if !indexState && a.Root.StateBackend() != "xattr" {
		t.Fatalf("this filesystem has no user extended attributes: the xattr case cannot run")
	}
	pools["system"] = [2]int64{900, 1000}
	ctx := context.Background()
	stubs := []string{"/p/f1", "/p/f2"}
	res, err := Migrate(ctx, a.Root, stubs, fsTarget(t), "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, stubs)
	for _, f := range files[1:3] {
		// Put the atimes back as they were (the migration read the files);
		// the mtime is the restored original, which the record expects.
		abs := filepath.Join(a.Root.Dir(), filepath.FromSlash(f.path))
		require.NoError(t, os.Chtimes(abs, now.Add(-f.atimeAge), now.Add(-f.mtAge)))
		e, _, err := a.Root.Stat(f.path)
		require.NoError(t, err)
		require.Equal(t, Migrated, e.State)
	}
	trig := []PolicyTrigger{{Pool: "system", Upper: 80, Lower: 50, Premigrate: 50}}

	action, _, out := policyCut(t, a, PolicySelect{Triggers: trig, States: []string{"resident", "premigrated"}})
	require.Equal(t, []string{"/p/f0", "/p/f3", "/p/f4", "/p/f5"}, action)
	require.EqualValues(t, 400, out.Bytes)

	action, _, out = policyCut(t, a, PolicySelect{Triggers: trig})
	require.Equal(t, []string{"/p/f0", "/p/f1", "/p/f2", "/p/f3", "/p/f4", "/p/f5"}, action,
		"stubs selected in their place, counting nothing")
	require.EqualValues(t, 600, out.Bytes, "a stub's batch entry has its original size")

	action, _, _ = policyCut(t, a, PolicySelect{States: []string{"migrated"}})
	require.Equal(t, stubs, action)
}

// TestPolicyStatfs: without a hook the pool "system" is the root's
// filesystem, measured with statfs; other names are refused.
func TestPolicyStatfs(t *testing.T) {
	t.Parallel()
	a, _ := policyActivities(t, time.Now(), tenFiles())
	a.Utilisation = nil
	// Anything used is above 0%: everything is taken; nothing is above 100%.
	action, _, out := policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "system", Upper: 0, Lower: 0, Premigrate: 0}}})
	require.Len(t, action, 10)
	require.True(t, out.Fired)
	require.Positive(t, out.Utilisation[0].Total)
	require.Positive(t, out.Utilisation[0].Used)
	_, _, out = policyCut(t, a, PolicySelect{Triggers: []PolicyTrigger{{Pool: "system", Upper: 100, Lower: 0}}})
	require.False(t, out.Fired)

	_, err := discover(t, a, DiscoverInput{JobID: 1, Mode: "policy", Paths: []string{"/"},
		Policy: &PolicySelect{Triggers: []PolicyTrigger{{Pool: "gold", Upper: 1}}}})
	requireBadInput(t, err, `unknown pool "gold"`)
}

func requireBadInput(t *testing.T, err error, msg string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, vocab.ErrBadInput, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), msg)
}

func TestPolicyBadInput(t *testing.T) {
	t.Parallel()
	a, _ := policyActivities(t, time.Now(), tenFiles())
	date := func(field, oon, age string) []PolicyGroup {
		return []PolicyGroup{{Name: "g1", Dates: []DateCondition{{Field: field, OlderOrNewer: oon, Age: age, Include: true}}}}
	}
	for _, tc := range []struct {
		sel *PolicySelect
		msg string
	}{
		{nil, "without a policy"},
		{&PolicySelect{OrderBy: "name"}, `unknown order "name"`},
		{&PolicySelect{Threads: -1}, "threads -1"},
		{&PolicySelect{States: []string{"stub"}}, `unknown state "stub"`},
		{&PolicySelect{Groups: []PolicyGroup{{Name: "empty"}}}, "condition group empty has no conditions"},
		{&PolicySelect{Groups: date("btime", "older", "1d")}, `unknown date field "btime"`},
		{&PolicySelect{Groups: date("atime", "before", "1d")}, `older_or_newer "before"`},
		{&PolicySelect{Groups: date("atime", "older", "1 day")}, `age "1 day"`},
		{&PolicySelect{Groups: []PolicyGroup{{Sizes: []SizeCondition{{GreaterOrLess: "more", Size: 1}}}}}, `greater_or_less "more"`},
		{&PolicySelect{Groups: []PolicyGroup{{Sizes: []SizeCondition{{GreaterOrLess: "less", Size: -1}}}}}, "size -1 is negative"},
		{&PolicySelect{Groups: []PolicyGroup{{Types: []FileTypeCondition{{Include: true}}}}}, "names no file types"},
		{&PolicySelect{Groups: []PolicyGroup{{Types: []FileTypeCondition{{FileTypes: []string{"."}}}}}}, "is not an extension"},
		{&PolicySelect{Triggers: []PolicyTrigger{{Pool: "p", Upper: 101}}}, "upper threshold 101"},
		{&PolicySelect{Triggers: []PolicyTrigger{{Pool: "p", Lower: -1}}}, "lower threshold -1"},
		{&PolicySelect{Triggers: []PolicyTrigger{{Pool: "p", Upper: 50, Lower: 60}}}, "lower threshold 60 is above the upper one 50"},
		{&PolicySelect{Triggers: []PolicyTrigger{{Upper: 50}}}, "names no pool"},
	} {
		_, err := discover(t, a, DiscoverInput{JobID: 1, Mode: "policy", Paths: []string{"/"}, Policy: tc.sel})
		requireBadInput(t, err, tc.msg)
	}
	_, err := discover(t, a, DiscoverInput{JobID: 1, Mode: "policy", Paths: []string{"/"}, Exclude: []string{"[a"}, Policy: &PolicySelect{}})
	requireBadInput(t, err, "invalid pattern")
}

// TestPolicyPathsAndGlobs: the scan covers only the policy's folders, a
// folder the site cannot take fails alone, and the site's globs apply.
func TestPolicyPathsAndGlobs(t *testing.T) {
	t.Parallel()
	a, _ := policyActivities(t, time.Now(), policyTree)
	sel := &PolicySelect{OrderBy: "path"}
	in := DiscoverInput{JobID: 3, Run: 2, Mode: "policy", Paths: []string{"/sub", "/missing", "/link.pdf/x", "/sub/f.pdf"}, Policy: sel}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.Equal(t, []string{"/sub/f.pdf", "/sub/g.txt"}, batchedPaths(t, a, in, out)[0])
	require.Len(t, out.Failed, 2)
	require.Equal(t, "/missing", out.Failed[0].Path)
	require.Equal(t, "/link.pdf/x", out.Failed[1].Path)

	in = DiscoverInput{JobID: 3, Run: 3, Mode: "policy", Paths: []string{"/"}, Policy: sel,
		Include: []string{"**/*.pdf", "**/*.PDF", "*.txt"}, Exclude: []string{"sub"}}
	out, err = discover(t, a, in)
	require.NoError(t, err)
	require.Equal(t, []string{"/a.pdf", "/b.PDF", "/c.txt"}, batchedPaths(t, a, in, out)[0])
}

// TestPolicyHeapSelection: the bounded selection keeps exactly the
// prefix a full sort would cut, whatever order the walk reports files in.
func TestPolicyHeapSelection(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		p := &policyScan{orderBy: []string{OrderAtime, OrderSize, OrderPath}[round%3], reverse: round%2 == 0}
		var files []policyFile
		for i := range 1 + rng.IntN(300) {
			f := policyFile{path: "/" + strings.Repeat("x", rng.IntN(3)) + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('A'+i/260)),
				key: int64(rng.IntN(50)), size: int64(rng.IntN(1000)), state: Resident}
			if rng.IntN(10) == 0 {
				f.state = Migrated
			}
			if rng.IntN(20) == 0 {
				f.size = 0
			}
			files = append(files, f)
		}
		need := int64(rng.IntN(100 * len(files)))
		sel := &selection{p: p, bounded: true, need: need}
		for _, f := range files {
			sel.add(f)
		}
		require.Equal(t, boundedWant(p, files, need), sel.sorted(), "round %d", round)
	}
}

// boundedWant is what a bounded selection of files needing need bytes
// must hold: the first files of one comparison sort, until need is taken.
func boundedWant(p *policyScan, files []policyFile, need int64) []policyFile {
	all := slices.Clone(files)
	slices.SortFunc(all, func(a, b policyFile) int { return p.compare(&a, &b) })
	var want []policyFile
	var taken int64
	for _, f := range all {
		if taken >= need {
			break
		}
		want = append(want, f)
		taken += f.counted()
	}
	return want
}

// TestPolicyResubmitKeepsThePolicysChoice: a resubmitted policy job
// discovers its undone paths again (Mode "", its Policy given). Before,
// they were matched against the job's rules alone: every file landed in
// rule 0 (a migration policy's migrate), also those its premigration band
// meant to keep resident, and a file the policy no longer selected was
// migrated too. Now only the files the policy still selects come back,
// and with triggers they go to the premigration band.
func TestPolicyResubmitKeepsThePolicysChoice(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, _ := policyActivities(t, now, tenFiles())
	old := PolicyGroup{Name: "old", Dates: []DateCondition{{Field: "atime", OlderOrNewer: "older", Age: "95d", Include: true}}}
	// f0…f5 are older than 95 days by atime; f9 is not.
	paths := []string{"/p/f0", "/p/f1", "/p/f9", "/p/missing"}
	resubmit := func(sel PolicySelect) (map[int][]string, *DiscoverOutput) {
		// The rules of a policy job (changes.policyJob).
		rules := []RuleFilter{{Type: TypeFile, State: "any"}, {Type: TypeFile, State: "resident"}}
		in := DiscoverInput{JobID: 11, Run: 2, Paths: paths, Rules: rules, BatchSize: 10, Policy: &sel}
		out, err := discover(t, a, in)
		require.NoError(t, err)
		return batchedPaths(t, a, in, out), out
	}
	states := func(out *DiscoverOutput) map[string]string {
		m := map[string]string{}
		for _, o := range out.Failed {
			m[o.Path] = o.State
		}
		return m
	}

	got, out := resubmit(PolicySelect{Groups: []PolicyGroup{old}, States: []string{"resident", "premigrated"}})
	require.Equal(t, map[int][]string{PolicyRuleAction: {"/p/f0", "/p/f1"}}, got, "no triggers: the policy's action: %+v", out)
	require.Equal(t, map[string]string{"/p/f9": OutcomeSkipped, "/p/missing": OutcomeFailure}, states(out))

	got, _ = resubmit(PolicySelect{Groups: []PolicyGroup{old}, States: []string{"resident", "premigrated"},
		Triggers: []PolicyTrigger{{Pool: "fast", Upper: 80, Lower: 50, Premigrate: 30}}})
	require.Equal(t, map[int][]string{PolicyRulePremigrate: {"/p/f0", "/p/f1"}}, got, "with triggers: premigrated, never released")
}

// TestDiscoveryHeartbeatsWhileItFindsNothing: a walk that writes no batch
// for a long while (globs or rules matching little) still heartbeats, so
// its attempt is not timed out and retried beside itself. The first folder
// read waits for a heartbeat: without one the walk would stall there.
func TestDiscoveryHeartbeatsWhileItFindsNothing(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		sub := filepath.Join(dir, "data", fmt.Sprintf("d%02d", i))
		require.NoError(t, os.MkdirAll(sub, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sub, "f.txt"), []byte("x"), 0o644))
	}
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	savedEvery, savedBeat := beatEvery, beat
	var beats atomic.Int32
	beatEvery = time.Millisecond
	beat = func(ctx context.Context, details ...any) { beats.Add(1); savedBeat(ctx, details...) }
	var waited atomic.Bool
	readingDir = func(string) {
		if waited.Swap(true) {
			return
		}
		for deadline := time.Now().Add(10 * time.Second); beats.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() { beatEvery, beat, readingDir = savedEvery, savedBeat, nil })
	for _, mode := range []string{"recursive", "snapdiff"} {
		beats.Store(0)
		waited.Store(false)
		out, err := discover(t, a, DiscoverInput{JobID: 1, Run: 1, Mode: mode, Paths: []string{"/data"},
			Include: []string{"**/*.none"}, Rules: []RuleFilter{{Type: TypeSymlink}}})
		require.NoError(t, err)
		require.Empty(t, out.Batches, "%s: nothing matches", mode)
		require.Positive(t, beats.Load(), "%s: heartbeats while it walks", mode)
	}
}

// TestDiscoveryHungOnAFolderStopsHeartbeating: a walk that reads nothing
// for stallAfter (a folder on a dead NFS server) stops heartbeating, so
// Temporal times its attempt out instead of waiting for the start-to-close
// timeout. Once the folder answers, the stalled attempt reads no further
// folder and writes no batch beside its retry. (The check made before each
// batch file is written, for a batch already on its way, is not tested.)
func TestDiscoveryHungOnAFolderStopsHeartbeating(t *testing.T) {
	dir := t.TempDir()
	for i := range 8 {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "data", fmt.Sprintf("d%02d", i)), 0o755))
	}
	for i := range 4 {
		sub := filepath.Join(dir, "data", "hung", fmt.Sprintf("s%d", i))
		require.NoError(t, os.MkdirAll(sub, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sub, "f.txt"), []byte("x"), 0o644))
	}
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	savedEvery, savedBeat, savedStall := beatEvery, beat, stallAfter
	var beats atomic.Int32
	beatEvery, stallAfter = time.Millisecond, 50*time.Millisecond
	beat = func(ctx context.Context, details ...any) { beats.Add(1); savedBeat(ctx, details...) }
	hung, release := make(chan struct{}), make(chan struct{})
	var readAfter atomic.Int32 // folders beneath the hung one read
	readingDir = func(rel string) {
		if rel == "data/hung" {
			close(hung)
			<-release
		}
		if strings.HasPrefix(rel, "data/hung/") {
			readAfter.Add(1)
		}
	}
	t.Cleanup(func() { beatEvery, beat, stallAfter, readingDir = savedEvery, savedBeat, savedStall, nil })

	in := DiscoverInput{JobID: 1, Run: 1, Mode: "recursive", Paths: []string{"/data"}, BatchSize: 1,
		Rules: []RuleFilter{{Type: TypeFile}}}
	done := make(chan error, 1)
	go func() {
		_, err := discover(t, a, in)
		done <- err
	}()
	<-hung
	// The heartbeats stop: a quiet spell of several stall periods comes.
	quiet := false
	for deadline := time.Now().Add(10 * time.Second); !quiet && time.Now().Before(deadline); {
		n := beats.Load()
		time.Sleep(6 * stallAfter)
		quiet = beats.Load() == n
	}
	require.True(t, quiet, "a walk that reads nothing stops heartbeating")
	close(release)
	err := <-done
	require.ErrorContains(t, err, "no progress")
	names, err := os.ReadDir(a.jobDir(in.JobID, in.Run))
	require.NoError(t, err)
	require.Empty(t, names, "the stalled attempt wrote no batch")
	require.Zero(t, readAfter.Load(), "the stalled attempt read no further folder")
}

// TestHeartbeatsGoOnWhileWorkMoves: work slower than stallAfter in all
// but making progress keeps heartbeating and is not cancelled.
func TestHeartbeatsGoOnWhileWorkMoves(t *testing.T) {
	savedEvery, savedBeat, savedStall := beatEvery, beat, stallAfter
	var beats atomic.Int32
	beatEvery, stallAfter = time.Millisecond, 500*time.Millisecond
	beat = func(ctx context.Context, details ...any) { beats.Add(1); savedBeat(ctx, details...) }
	t.Cleanup(func() { beatEvery, beat, stallAfter = savedEvery, savedBeat, savedStall })
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestActivityEnvironment()
	var late int32
	work := func(ctx context.Context) error {
		var moved atomic.Int64
		return beatWhileMoving(ctx, moved.Load, func() any { return nil }, func(ctx context.Context) error {
			const steps = 150 // 1.5 s, three stall periods
			for i := range steps {
				if i == steps-10 {
					late = beats.Load()
				}
				time.Sleep(10 * time.Millisecond)
				moved.Add(1)
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			late = beats.Load() - late
			return nil
		})
	}
	env.RegisterActivity(work)
	_, err := env.ExecuteActivity(work)
	require.NoError(t, err)
	require.Positive(t, late, "heartbeats go on after three stall periods of work that moves")
}

// TestAPolicysSpaceFolderThatIsASymlinkFails: a space folder that is a
// symlink to a folder was neither scanned nor reported: the run looked
// like one that found nothing to do (a reviewer's finding). It fails
// alone, saying why.
func TestAPolicysSpaceFolderThatIsASymlinkFails(t *testing.T) {
	a, _ := policyActivities(t, time.Now(), policyTree)
	require.NoError(t, os.Symlink("sub", filepath.Join(a.Root.Dir(), "alias")))
	in := DiscoverInput{JobID: 4, Run: 1, Mode: "policy", Paths: []string{"/alias", "/sub"}, Policy: &PolicySelect{OrderBy: "path"}}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.Len(t, out.Failed, 1, "%+v", out)
	require.Equal(t, "/alias", out.Failed[0].Path)
	require.Contains(t, out.Failed[0].Message, "symlink")
	require.NotEmpty(t, batchedPaths(t, a, in, out), "the other folder is scanned")
}

// TestPolicyResubmitKeepsTheSitesGlobs: a resubmitted policy job scans a
// folder path again (a space refused on the first run) with the site's
// include/exclude globs, as the first scan did; before, it selected the
// files the site excludes (a reviewer's suspicion, confirmed here).
func TestPolicyResubmitKeepsTheSitesGlobs(t *testing.T) {
	t.Parallel()
	a, _ := policyActivities(t, time.Now(), policyTree)
	rules := []RuleFilter{{Type: TypeFile, State: "any"}, {Type: TypeFile, State: "resident"}}
	in := DiscoverInput{JobID: 12, Run: 2, Paths: []string{"/sub", "/c.txt"}, Rules: rules, BatchSize: 10,
		Exclude: []string{"**/*.txt"}, Policy: &PolicySelect{States: []string{"resident", "premigrated"}}}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.Equal(t, map[int][]string{PolicyRuleAction: {"/sub/f.pdf"}}, batchedPaths(t, a, in, out))
	require.Len(t, out.Failed, 1, "%+v", out.Failed)
	require.Equal(t, "/c.txt", out.Failed[0].Path)
}
