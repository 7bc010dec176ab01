package site

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The metadata paths of the fault scenario, and its tree's size (enough
// for two scan batches).
var faultMetaPaths = []string{"/m/a", "/m/b", "/m/c"}

const faultTreeFiles = scanBatch + 500

func faultIndexTree(t *testing.T, dir string) {
	t.Helper()
	for i := 0; i < faultTreeFiles; i++ {
		p := filepath.Join(dir, fmt.Sprintf("t/%02d/%05d", i%50, i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	for _, p := range faultMetaPaths {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "m"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644))
	}
}

// faultIndexScenario sets metadata (two fields set, one removed, a tag)
// on three files, then scans the index: what a retried activity repeats.
func faultIndexScenario(t *testing.T, dir string) {
	ctx := context.Background()
	a, err := NewActivities("s1", "default", "n1", dir, "")
	require.NoError(t, err)
	one, two := "1", "2"
	out, err := a.SetMetadata(ctx, SetMetadataInput{Paths: faultMetaPaths, Change: MetaChange{
		Set: map[string]*string{"a": &one, "b": &two, "c": nil}, AddTags: []string{"t"}}})
	require.NoError(t, err)
	for _, r := range out.Results {
		require.Empty(t, r.Error)
	}
	_, err = a.ScanFileIndex(ctx, ScanFileIndexInput{})
	require.NoError(t, err)
}

func TestFileIndexFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_FI_FAULT_ROOT")
	if dir == "" {
		return // run by TestFileIndexKillAtEveryFaultPoint only
	}
	faultIndexScenario(t, dir)
}

// TestFileIndexKillAtEveryFaultPoint kills a worker at every instant
// between two writes of a metadata change (between attributes, between
// the attributes and the index) and of a scan (between batches), then
// runs the same change and scan again, as a retried activity would: the
// files carry exactly the metadata asked for, and the index agrees with
// them and with the tree.
func TestFileIndexKillAtEveryFaultPoint(t *testing.T) {
	t.Parallel()
	prepare := func() string {
		dir := t.TempDir()
		faultIndexTree(t, dir)
		// Each file starts with a field the change removes.
		a, err := NewActivities("s1", "default", "n1", dir, "")
		require.NoError(t, err)
		old := "old"
		_, err = a.SetMetadata(context.Background(), SetMetadataInput{Paths: faultMetaPaths,
			Change: MetaChange{Set: map[string]*string{"c": &old}}})
		require.NoError(t, err)
		return dir
	}
	child := func(dir string, env ...string) bool {
		return runChild(t, "^TestFileIndexFaultChild$", append(env, "HUB_FI_FAULT_ROOT="+dir)...)
	}
	trace := filepath.Join(t.TempDir(), "trace")
	require.False(t, child(prepare(), "HUB_FAULT_TRACE="+trace))
	data, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(data))
	kinds := map[string]bool{}
	for _, p := range points {
		kinds[strings.SplitN(p, "@", 2)[0]] = true
	}
	require.Equal(t, map[string]bool{"meta.xattr": true, "meta.written": true, "fileindex.batch": true}, kinds, "%v", points)
	for _, point := range points {
		dir := prepare()
		require.True(t, child(dir, "HUB_FAULT_POINT="+point), "killed at %s", point)
		faultIndexScenario(t, dir) // the retry
		root := newRoot(t, dir, false)
		x, err := OpenFileIndex(root, filepath.Join(root.Dir(), hubDir, fileIndexName))
		require.NoError(t, err)
		for _, p := range faultMetaPaths {
			if root.StateBackend() == "xattr" {
				m, ok, err := readXattrMeta(filepath.Join(dir, p))
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, Meta{Fields: map[string]string{"a": "1", "b": "2"}, Tags: []string{"t"}}, m, "%s after a kill at %s", p, point)
			}
		}
		ctx := context.Background()
		got, _, err := x.Query(ctx, IndexQuery{Path: "/", Recursive: true, Limit: 10,
			Filters: SearchFilters{Metadata: map[string]string{"a": "1", "b": "2"}, Tags: []string{"t"}}})
		require.NoError(t, err)
		require.Equal(t, faultMetaPaths, paths(got), point)
		got, _, err = x.Query(ctx, IndexQuery{Path: "/", Recursive: true, Limit: 10, Filters: SearchFilters{Metadata: map[string]string{"c": "*"}}})
		require.NoError(t, err)
		require.Empty(t, got, "the removed field is gone everywhere (%s)", point)
		st, err := x.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(faultTreeFiles+len(faultMetaPaths)+50+2), st.Entries, "files, folders t/00..t/49, t and m (%s)", point)
		require.NoError(t, x.Close())
	}
}

// runChild runs the test binary's tests matching run with env added and
// reports whether the child was killed by SIGKILL.
func runChild(t *testing.T, run string, env ...string) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	require.NoError(t, err, "%s", out)
	return false
}
