package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestALeftoverBatchRetriesItsFailures: a step retried within its run
// replays its journal (each path reported once), but a batch left over
// from an earlier run (cancelled or failed mid-batch) runs with a journal
// of the new run: a path that failed before is tried again, not reported
// failed again, and one done before is done again ("already …").
func TestALeftoverBatchRetriesItsFailures(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	for _, name := range []string{"a.txt", "b.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "data", name), []byte(name), 0o644))
	}
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	out, err := discover(t, a, DiscoverInput{JobID: 1, Run: 1, Mode: "recursive", Paths: []string{"/data"},
		Rules: []RuleFilter{{Type: TypeFile}}})
	require.NoError(t, err)
	require.Len(t, out.Batches, 1)
	require.NoError(t, os.Remove(filepath.Join(dir, "data", "b.txt"))) // b fails in run 1

	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	step := func(inRun int) map[string]string {
		var res StepOutput
		require.NoError(t, runActivity(a, a.RunStep, StepInput{JobID: 1, Run: 1, InRun: inRun, Batch: out.Batches[0].Index,
			Name: "premigrate", Targets: []TargetSpec{spec}}, &res))
		states := map[string]string{}
		for _, o := range res.Outcomes {
			states[o.Path] = o.State
		}
		return states
	}
	require.Equal(t, map[string]string{"/data/a.txt": OutcomeSuccess, "/data/b.txt": OutcomeFailure}, step(1))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "b.txt"), []byte("b.txt"), 0o644))
	require.Equal(t, OutcomeFailure, step(1)["/data/b.txt"], "a retry within the run replays its journal")
	require.Equal(t, map[string]string{"/data/a.txt": OutcomeSuccess, "/data/b.txt": OutcomeSuccess}, step(2),
		"run 2 tries the leftover batch's failure again")
}

// TestManyBatchesGrowLarger: past manyBatches batches in a job, batches
// take maxBatchEntries entries whatever the site's sizes, so the job's list
// of batches stays within a Temporal payload.
func TestManyBatchesGrowLarger(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	for i := range 10 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "data", fmt.Sprintf("f%02d", i)), []byte("x"), 0o644))
	}
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	in := DiscoverInput{JobID: 1, Run: 1, Mode: "recursive", Paths: []string{"/data"}, FirstBatch: manyBatches - 2,
		BatchSize: 1, BatchBytes: 1, Rules: []RuleFilter{{Type: TypeFile}}}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	var sizes []int
	for _, b := range out.Batches {
		sizes = append(sizes, b.N)
	}
	require.Equal(t, []int{1, 1, 8}, sizes)
	require.Len(t, batchedPaths(t, a, in, out)[0], 10)

	// Their bytes stay bounded (manyBatchBytes): sparse files of 600 GiB
	// go two to a batch.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "huge"), 0o755))
	for i := range 4 {
		f, err := os.Create(filepath.Join(dir, "huge", fmt.Sprintf("h%d", i)))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(600<<30))
		require.NoError(t, f.Close())
	}
	in.Paths, in.FirstBatch, in.Run = []string{"/huge"}, manyBatches, 2
	out, err = discover(t, a, in)
	require.NoError(t, err)
	sizes = nil
	for _, b := range out.Batches {
		sizes = append(sizes, b.N)
	}
	require.Equal(t, []int{2, 2}, sizes)
}

// TestAStalledAttemptsLateBatchIsNeverRead: a discovery attempt whose
// batch write hung (a dead server) is retried by Temporal; when the hung
// write finally lands, after the retry wrote its own batches, the steps
// still read the retry's batch, not the stale one.
func TestAStalledAttemptsLateBatchIsNeverRead(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "a.txt"), []byte("a"), 0o644))
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	var attempts atomic.Int32
	hung, release := make(chan struct{}), make(chan struct{})
	savedAttempt := attemptOf
	attemptOf = func(context.Context) int { return int(attempts.Add(1)) }
	var writes atomic.Int32
	writingBatch = func(string) {
		if writes.Add(1) == 1 { // attempt 1's
			close(hung)
			<-release
		}
	}
	t.Cleanup(func() { attemptOf, writingBatch = savedAttempt, nil })

	in := DiscoverInput{JobID: 1, Run: 1, Mode: "recursive", Paths: []string{"/data"}, AttemptNames: true,
		Rules: []RuleFilter{{Type: TypeFile}}}
	first := make(chan error, 1)
	go func() {
		_, err := discover(t, a, in)
		first <- err
	}()
	<-hung
	// Meanwhile the tree changes and the retry discovers it.
	require.NoError(t, os.Remove(filepath.Join(dir, "data", "a.txt")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "b.txt"), []byte("b"), 0o644))
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.Equal(t, []BatchMeta{{Index: 0, Rule: 0, N: 1, Attempt: 2}}, out.Batches)
	close(release)
	require.NoError(t, <-first) // the stale write lands

	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	var res StepOutput
	require.NoError(t, runActivity(a, a.RunStep, StepInput{JobID: 1, Run: 1, Batch: 0, BatchAttempt: out.Batches[0].Attempt,
		Name: "premigrate", Targets: []TargetSpec{spec}}, &res))
	require.Len(t, res.Outcomes, 1)
	require.Equal(t, "/data/b.txt", res.Outcomes[0].Path, "the step reads the retry's batch")
	require.Equal(t, OutcomeSuccess, res.Outcomes[0].State)
}

// TestAnOldNodeFindsNoEarlierRunsSuccesses: during a rolling upgrade, a
// node of an earlier version reads a batch's journals by their plain
// names whatever the run. Once a later run starts a left-over batch on an
// upgraded node, those names hold nothing: an old node running the next
// step finds no success of the earlier run to act on, where the step of
// this run failed.
func TestAnOldNodeFindsNoEarlierRunsSuccesses(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "a.txt"), []byte("a"), 0o644))
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	out, err := discover(t, a, DiscoverInput{JobID: 1, Run: 1, Mode: "recursive", Paths: []string{"/data"},
		Rules: []RuleFilter{{Type: TypeFile}}})
	require.NoError(t, err)
	good := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	gone := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: filepath.Join(tdir, "gone")}}
	step := func(inRun, step int, name string, spec TargetSpec) map[string]string {
		var res StepOutput
		require.NoError(t, runActivity(a, a.RunStep, StepInput{JobID: 1, Run: 1, InRun: inRun, Batch: out.Batches[0].Index,
			Step: step, Name: name, Targets: []TargetSpec{spec}}, &res))
		states := map[string]string{}
		for _, o := range res.Outcomes {
			states[o.Path] = o.State
		}
		return states
	}
	// Run 1 premigrates a.txt, then is cancelled before its next step.
	require.Equal(t, map[string]string{"/data/a.txt": OutcomeSuccess}, step(1, 0, "premigrate", good))
	// Run 2 starts the left-over batch on an upgraded node; its premigrate fails.
	require.Equal(t, map[string]string{"/data/a.txt": OutcomeFailure}, step(2, 0, "premigrate", gone))
	// A node not yet upgraded (it ignores InRun) runs the next step.
	require.Empty(t, step(0, 1, "migrate", good), "run 1's success is not acted on")
	data, err := os.ReadFile(filepath.Join(dir, "data", "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "a", string(data), "a.txt is not stubbed")
}
