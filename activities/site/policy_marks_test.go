package site

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPolicyFolderMarks: a policy scan reads the state attributes of the
// files of marked folders only (folders the site wrote a record in); a
// renamed folder keeps its mark; a stub a user moved into an unmarked
// folder is selected as resident, and the step then leaves it alone, its
// data safe; a site whose marks are not complete (an earlier version's)
// reads every attribute until a full scan of its file index completes
// them.
func TestPolicyFolderMarks(t *testing.T) {
	t.Parallel()
	now := time.Now()
	files := append(tenFiles(), policyFixture{"/q/x", 100, 50 * day, day})
	a, _ := policyActivities(t, now, files)
	if a.Root.StateBackend() != "xattr" {
		t.Fatalf("this filesystem has no user extended attributes: folder marks cannot be tested")
	}
	require.True(t, a.Root.state.marks.complete.Load(), "a fresh site has nothing to mark")
	ctx := context.Background()
	target := fsTarget(t)
	stubs := []string{"/p/f1", "/p/f2"}
	res, err := Migrate(ctx, a.Root, stubs, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, stubs)
	marks, err := os.ReadDir(a.Root.state.marks.dir)
	require.NoError(t, err)
	require.Len(t, marks, 2, "the folder /p and the complete flag")

	scan := func() []string {
		t.Helper()
		sel := PolicySelect{OrderBy: OrderPath, States: []string{"resident", "premigrated"}}
		in := DiscoverInput{JobID: time.Now().UnixNano(), Run: 1, Mode: "policy", Paths: []string{"/"}, BatchSize: 100, Policy: &sel}
		out, err := discover(t, a, in)
		require.NoError(t, err)
		return batchedPaths(t, a, in, out)[PolicyRuleAction]
	}
	require.NoError(t, os.Rename(filepath.Join(a.Root.Dir(), "p"), filepath.Join(a.Root.Dir(), "p2")))
	require.Equal(t, []string{"/p2/f0", "/p2/f3", "/p2/f4", "/p2/f5", "/p2/f6", "/p2/f7", "/p2/f8", "/p2/f9", "/q/x"}, scan(),
		"the renamed folder keeps its mark: its stubs are known")

	// A user moves a stub into an unmarked folder.
	require.NoError(t, os.Rename(filepath.Join(a.Root.Dir(), "p2", "f1"), filepath.Join(a.Root.Dir(), "q", "f1")))
	require.Contains(t, scan(), "/q/f1", "seen as a resident file: the mark is a hint")
	res, err = Migrate(ctx, a.Root, []string{"/q/f1"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeSkipped, []string{"/q/f1"})
	res, err = Recall(ctx, a.Root, []string{"/q/f1"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/q/f1"})
	fi, err := os.Stat(filepath.Join(a.Root.Dir(), "q", "f1"))
	require.NoError(t, err)
	require.EqualValues(t, 100, fi.Size(), "the moved stub's data came back")
	res, err = Migrate(ctx, a.Root, []string{"/q/f1"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/q/f1"})
	require.NotContains(t, scan(), "/q/f1", "migrated by the site, in a folder it marked")

	// An earlier version's site: records, a key, no marks.
	require.NoError(t, os.RemoveAll(a.Root.state.marks.dir))
	a.Root = newRoot(t, a.Root.Dir(), false)
	require.False(t, a.Root.state.marks.complete.Load())
	require.NotContains(t, scan(), "/q/f1", "without complete marks every attribute is read")
	ix, err := a.Root.Files()
	require.NoError(t, err)
	_, err = ix.Scan(ctx, nil, nil)
	require.NoError(t, err)
	require.True(t, a.Root.state.marks.complete.Load(), "a full scan of the file index completes the marks")
	require.NotContains(t, scan(), "/q/f1", "the scan marked the folder where it found the stub")
	require.NotContains(t, scan(), "/p2/f2")
}

// TestPolicySortedLarge: a selection large enough to be sorted in halves
// comes out in the order one sort gives, for every order key.
func TestPolicySortedLarge(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var files []policyFile
	for i := range 20_000 {
		files = append(files, policyFile{path: fmt.Sprintf("/d%d/f%d", rng.IntN(50), i), key: rng.Int64N(1000), size: rng.Int64N(1 << 20)})
	}
	for _, order := range []string{OrderAtime, OrderPath} {
		for _, reverse := range []bool{false, true} {
			p := &policyScan{orderBy: order, reverse: reverse}
			want := slices.Clone(files)
			slices.SortFunc(want, func(a, b policyFile) int { return p.compare(&a, &b) })
			got := (&selection{p: p, files: slices.Clone(files)}).sorted()
			require.Equal(t, want, got, "%s reverse=%v", order, reverse)
		}
	}
}
