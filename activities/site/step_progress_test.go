package site

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStepReporter: a step reports path by path, at most once per interval
// inside a chunk, always at a chunk's end, with bytes of journaled paths.
func TestStepReporter(t *testing.T) {
	entries := []batchEntry{{Path: "/a", Size: 10}, {Path: "/b", Size: 20}, {Path: "/c", Size: 30}, {Path: "/d", Size: 40}}
	size := map[string]int64{}
	for _, e := range entries {
		size[e.Path] = e.Size
	}
	var got []StepProgress
	r := newStepReporter(context.Background(), StepInput{Name: "premigrate", Step: 0, Run: 2, Batch: 7}, entries)
	r.beat = func(_ context.Context, d ...any) { got = append(got, d[0].(StepProgress)) }
	r.every = time.Hour

	r.journaled([]Outcome{{Path: "/a"}}, size) // an earlier attempt's journal
	require.Equal(t, []StepProgress{{Step: "premigrate", Run: 2, Batch: 7, Files: 4, FilesDone: 1, Bytes: 100, BytesDone: 10}}, got)

	one, two := r.counter(), r.counter() // two storage calls in one chunk (two targets)
	one(1)
	two(1)
	one(1) // a keepalive during a copy
	require.Len(t, got, 1, "throttled inside a chunk")
	r.every = 0
	two(2)
	require.Equal(t, 4, got[len(got)-1].FilesDone, "1 journaled + 1 + 2 in the chunk")
	require.Equal(t, int64(10), got[len(got)-1].BytesDone, "bytes move with the journal")

	r.every = time.Hour
	r.journaled([]Outcome{{Path: "/b"}, {Path: "/c"}, {Path: "/d"}}, size)
	last := got[len(got)-1]
	require.Equal(t, 4, last.FilesDone)
	require.Equal(t, int64(100), last.BytesDone, "a chunk's end is always reported")
}
