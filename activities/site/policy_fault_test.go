package site

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The policy discovery of the fault test: a migration policy over a tree
// whose folder /p holds two stubs (a marked folder) beside plain folders,
// in batches of three written two at a time.
func faultPolicyInput() DiscoverInput {
	return DiscoverInput{JobID: 11, Run: 1, Mode: "policy", Paths: []string{"/"}, BatchSize: 3,
		Policy: &PolicySelect{OrderBy: OrderPath, States: []string{"resident", "premigrated"}}}
}

func faultPolicyActivities(t *testing.T, dir string, now time.Time) *Activities {
	return &Activities{Root: newRoot(t, dir, false), Site: "west", Now: func() time.Time { return now }}
}

// TestPolicyFaultChild is the worker process TestPolicyDiscoveryKilled
// kills; on its own it does nothing.
func TestPolicyFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_POLICY_FAULT_ROOT")
	if dir == "" {
		return
	}
	ns, err := strconv.ParseInt(os.Getenv("HUB_POLICY_FAULT_NOW"), 10, 64)
	require.NoError(t, err)
	_, err = discover(t, faultPolicyActivities(t, dir, time.Unix(0, ns)), faultPolicyInput())
	require.NoError(t, err)
}

// TestPolicyDiscoveryKilled kills a site worker at every instant between
// two filesystem operations of a policy discovery (each batch file's
// temporary file, its sync and its rename, with two batches written at
// once), then runs the discovery again as a retried activity would: the
// batches are exactly those of an uninterrupted run, no temporary file is
// left among them, and the files and their state are untouched.
func TestPolicyDiscoveryKilled(t *testing.T) {
	t.Parallel()
	now := time.Now()
	files := append(tenFiles(), policyFixture{"/q/x1", 100, 50 * day, day}, policyFixture{"/q/x2", 100, 50 * day, day},
		policyFixture{"/r/y1", 100, 50 * day, day})
	dir := t.TempDir()
	writePolicyTree(t, dir, now, files)
	a := faultPolicyActivities(t, dir, now)
	stubs := []string{"/p/f1", "/p/f2"}
	res, err := Migrate(context.Background(), a.Root, stubs, fsTarget(t), "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, stubs)

	in := faultPolicyInput()
	clean, err := discover(t, a, in)
	require.NoError(t, err)
	want := batchedPaths(t, a, in, clean)
	require.Equal(t, []string{"/p/f0", "/p/f3", "/p/f4", "/p/f5", "/p/f6", "/p/f7", "/p/f8", "/p/f9", "/q/x1", "/q/x2", "/r/y1"},
		want[PolicyRuleAction], "the stubs of the marked folder are not selected")

	child := func(env ...string) (killed bool) {
		return runChild(t, "^TestPolicyFaultChild$", append(env, "HUB_POLICY_FAULT_ROOT="+dir,
			"HUB_POLICY_FAULT_NOW="+strconv.FormatInt(now.UnixNano(), 10))...)
	}
	trace := filepath.Join(t.TempDir(), "trace")
	require.False(t, child("HUB_FAULT_TRACE="+trace))
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(b))
	require.Contains(t, points, "commit.renamed@4", "four batch files, each written through a temporary file")

	for _, point := range points {
		require.True(t, child("HUB_FAULT_POINT="+point), "killed at %s", point)
		out, err := discover(t, a, in)
		require.NoError(t, err, point)
		require.Equal(t, want, batchedPaths(t, a, in, out), "retried after a kill at %s", point)
		var names []string
		for _, bm := range out.Batches {
			names = append(names, filepath.Base(batchFile(a.jobDir(in.JobID, in.Run), bm.Index, bm.Attempt)))
		}
		left, err := os.ReadDir(a.jobDir(in.JobID, in.Run))
		require.NoError(t, err)
		var got []string
		for _, e := range left {
			got = append(got, e.Name())
		}
		require.Equal(t, names, got, "only the batches, after a kill at %s", point)
		for _, s := range stubs {
			e, _, err := a.Root.Stat(s)
			require.NoError(t, err)
			require.Equal(t, Migrated, e.State, "%s after a kill at %s", s, point)
		}
	}
	t.Logf("%d fault points", len(points))
}
