package site

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// StepProgress is the heartbeat detail of a running RunStep: which step of
// which batch, and how far it is. The hub reads it from the pending
// activity (DescribeWorkflowExecution) for a job's live progress, and the
// Temporal UI shows it as is, so its fields are named.
type StepProgress struct {
	Step      string `json:"step"`       // the step's name (premigrate, migrate, recall, …)
	StepIndex int    `json:"step_index"` // index in the batch's chain of steps
	Run       int    `json:"run"`        // the job run whose batch this is
	Batch     int    `json:"batch"`
	Files     int    `json:"files"`      // paths this step handles in the batch
	FilesDone int    `json:"files_done"` // paths finished, whatever their outcome
	Bytes     int64  `json:"bytes"`      // sizes of those paths when the batch was discovered
	// BytesDone is the size of the paths whose outcome is journaled: it
	// moves a chunk (stepChunk paths) at a time, FilesDone path by path.
	BytesDone int64 `json:"bytes_done"`
}

// stepBeatEvery is the least time between two heartbeats of a step's
// progress; the end of each chunk is always reported. The site worker's
// MaxHeartbeatThrottleInterval sends them on to the server as often.
const stepBeatEvery = time.Second

// stepReporter heartbeats a step's progress as paths finish inside a
// chunk, so a batch no longer goes from nothing to everything at once.
type stepReporter struct {
	ctx     context.Context
	beat    func(ctx context.Context, details ...any)
	every   time.Duration
	mu      sync.Mutex
	p       StepProgress
	inChunk int // paths finished in the chunk running, not yet journaled
	last    time.Time
}

func newStepReporter(ctx context.Context, in StepInput, entries []batchEntry) *stepReporter {
	r := &stepReporter{ctx: ctx, beat: activity.RecordHeartbeat, every: stepBeatEvery,
		p: StepProgress{Step: in.Name, StepIndex: in.Step, Run: in.Run, Batch: in.Batch, Files: len(entries)}}
	for _, e := range entries {
		r.p.Bytes += e.Size
	}
	return r
}

// journaled records outcomes written to the step's journal (those of an
// earlier attempt, then each chunk's) and reports them at once.
func (r *stepReporter) journaled(outs []Outcome, size map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.p.FilesDone += len(outs)
	for _, o := range outs {
		r.p.BytesDone += size[o.Path]
	}
	r.inChunk = 0
	r.send(true)
}

// counter returns the Progress callback of one storage call in a chunk:
// it is called with that call's own running count (and again unchanged
// during long copies, which keeps the activity alive).
func (r *stepReporter) counter() func(int) {
	seen := 0
	return func(n int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.inChunk += n - seen
		seen = n
		r.send(false)
	}
}

// send heartbeats the progress, at most once per r.every unless forced.
// Called with r.mu held.
func (r *stepReporter) send(force bool) {
	now := time.Now()
	if !force && !r.last.IsZero() && now.Sub(r.last) < r.every {
		return
	}
	r.last = now
	p := r.p
	p.FilesDone = min(p.FilesDone+r.inChunk, p.Files)
	r.beat(r.ctx, p)
}

type stepReporterKey struct{}

// stepBeat is the Progress callback for a storage call made by a step:
// the step's reporter when RunStep set one, a bare heartbeat otherwise.
func stepBeat(ctx context.Context) func(int) {
	if r, ok := ctx.Value(stepReporterKey{}).(*stepReporter); ok {
		return r.counter()
	}
	return func(n int) { activity.RecordHeartbeat(ctx, n) }
}
