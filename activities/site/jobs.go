package site

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/workflows/vocab"
)

// Job batches live on the site, under <root>/.hub/jobs/<job>/r<run>/: the
// workflow's history carries only batch numbers and counts. A site's nodes
// share the root, so any node of the queue can run any batch.

// Outcome states of a path, as the hub records them.
const (
	OutcomeSuccess = "SUCCESS"
	OutcomeFailure = "FAILURE"
	OutcomeSkipped = "SKIPPED"
)

// Outcome is the compact per-path result of a step or of discovery.
type Outcome struct {
	Path    string    `json:"p"`
	State   string    `json:"s"`
	Message string    `json:"m,omitempty"`
	Sent    *SentFile `json:"f,omitempty"` // send/site_sync: what the destination needs
	Size    int64     `json:"b,omitempty"` // logical bytes of the path, from its batch entry (job statistics)
}

// RuleFilter is the selection part of a workflow definition's filter rule.
type RuleFilter struct {
	Type  string // all|file|directory|symlink
	State string // any|resident|premigrated|migrated
}

// DiscoverInput asks for a job's paths to be found and written as batches.
type DiscoverInput struct {
	JobID      int64
	Run        int
	FirstBatch int    // number of the first batch written
	Mode       string // "recursive", "snapdiff", "policy", or "" (exactly the given paths)
	Paths      []string
	Include    []string
	Exclude    []string
	Rules      []RuleFilter
	BatchSize  int
	BatchBytes int64
	AutoBatch  bool
	// Retry: Paths failed in an earlier run (a resubmit). A given folder
	// walked now is reported skipped ("walked"), which replaces its
	// earlier failure; its files are the job's paths.
	Retry bool `json:",omitempty"`
	// Skip names batches whose paths are already queued (a resubmit's
	// leftover batches): explicitly given paths found in them are left out.
	Skip []vocab.BatchRef
	// Policy is what a "policy" discovery selects over Paths (the
	// policy's space folders); see policy.go.
	Policy *PolicySelect
	// AttemptNames: name batch files by attempt (see batchFile). Set by
	// workflows that pass BatchMeta.Attempt on to the steps; a site
	// worker of an earlier version ignores it and reports attempt 0.
	AttemptNames bool `json:",omitempty"`
}

// maxBatchEntries caps a batch whatever the site asks: a batch's outcomes
// travel in one activity result, which Temporal limits to 2 MB.
const maxBatchEntries = 2000

// manyBatches: from a job's batch numbered this on, batches take
// maxBatchEntries entries whatever the site's sizes (file_batch_size,
// file_batch_gb, auto-sizing). A job's workflow carries its list of
// batches (about 40 bytes each) through Temporal, whose payloads are
// limited to 2 MB: small sizes over a big tree (1 GiB files auto-sized in
// fives, a file_batch_size of 10 over a million files) made the list too
// big to pass, and the job could not run.
const manyBatches = 10000

// manyBatchBytes bounds those batches' bytes (unless the site's own bound
// is higher): at 100 MB/s, 3 hours of a step, within the default 24 h
// task_invalidation_timeout.
const manyBatchBytes = 1 << 40

// BatchMeta describes one written batch: which rule's steps apply and how
// many paths it holds.
type BatchMeta struct {
	Index   int
	Rule    int
	N       int
	Attempt int `json:",omitempty"` // see batchFile
}

// DiscoverOutput lists the batches written and the paths that could not be
// discovered (only for explicitly given paths, a bounded list).
type DiscoverOutput struct {
	Batches []BatchMeta
	Files   int64
	Bytes   int64
	Failed  []Outcome
	// Snapdiff is the pending manifest to commit when the job succeeds.
	Snapdiff string
	// Fired tells whether a policy discovery's triggers fired (always, for
	// a policy without triggers); one that did not wrote no batches.
	Fired bool
	// Utilisation is what a policy discovery measured, one per trigger.
	Utilisation []PoolUtilisation
}

// batchEntry is one line of a batch file.
type batchEntry struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	State   State  `json:"state,omitempty"`
	Size    int64  `json:"size"`
	Change  Change `json:"change,omitempty"`
	OldPath string `json:"old_path,omitempty"`
	// Mtime (Unix ns) of a deleted file's last version: a site_sync's
	// destination deletes its own copy only when it is that version.
	Mtime int64 `json:"mtime,omitempty"`
}

func (a *Activities) jobDir(jobID int64, run int) string {
	return filepath.Join(a.Root.Dir(), hubDir, "jobs", fmt.Sprint(jobID), fmt.Sprintf("r%d", run))
}

// attemptOf is the attempt of ctx's activity (1 outside one); tests set
// it. writingBatch, when set (by tests), is called as a batch file is
// about to be written.
var (
	attemptOf = func(ctx context.Context) int {
		if activity.IsActivity(ctx) {
			return int(activity.GetInfo(ctx).Attempt)
		}
		return 1
	}
	writingBatch func(name string)
)

// batchFile names a batch written by the given discovery attempt. An
// attempt that stalled (its server hung mid-write) can still finish a
// write after Temporal retried it: a retry's batches are therefore named
// by attempt, and the late file lands under a name no step reads. The
// first attempt keeps the plain name, as do workflows that do not ask for
// names by attempt (DiscoverInput.AttemptNames).
func batchFile(dir string, index, attempt int) string {
	if attempt <= 1 {
		return filepath.Join(dir, fmt.Sprintf("b%06d.jsonl", index))
	}
	return filepath.Join(dir, fmt.Sprintf("b%06d.a%d.jsonl", index, attempt))
}

func outcomeFile(dir string, index, step int) string {
	return filepath.Join(dir, fmt.Sprintf("b%06d.s%02d.out", index, step))
}

// journalFile is the journal of in's step: outcomeFile, except for a
// batch left over from an earlier run, whose journal in this run is new.
// Its old journal holds the outcomes its cancelled or failed run never
// recorded; replayed, its failures would be reported again instead of
// tried again, and the paths it did are soon done again ("already …").
func journalFile(dir string, in StepInput, step int) string {
	if in.InRun == 0 || in.InRun == in.Run {
		return outcomeFile(dir, in.Batch, step)
	}
	return filepath.Join(dir, fmt.Sprintf("b%06d.s%02d.r%d.out", in.Batch, step, in.InRun))
}

// retireOldJournals renames the journals a left-over batch kept from its
// own run out of the way as a later run starts it. A site worker of an
// earlier version, which reads those names whatever the run (a node not
// yet upgraded during a rolling upgrade), then finds no earlier success to
// act on in a later step: it leaves the paths alone rather than acting on
// what the earlier run did. Idempotent.
func retireOldJournals(dir string, in StepInput) error {
	old, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("b%06d.s[0-9][0-9].out", in.Batch)))
	if err != nil {
		return err
	}
	for _, name := range old {
		kept := strings.TrimSuffix(name, ".out") + fmt.Sprintf(".r%d.out", in.Run)
		if err := os.Rename(name, kept); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// matchRule returns the first rule selecting e, or -1.
func matchRule(rules []RuleFilter, typ string, state State) int {
	for i, r := range rules {
		if r.Type != "" && r.Type != "all" && r.Type != typ {
			continue
		}
		if r.State != "" && r.State != "any" && State(r.State) != state {
			continue
		}
		return i
	}
	return -1
}

// batchWriter groups entries per rule into batch files.
type batchWriter struct {
	mu      sync.Mutex
	dir     string
	next    int
	size    int
	auto    bool // recompute size from the files seen so far
	bytes   int64
	open    map[int][]batchEntry
	openSz  map[int]int64
	out     DiscoverOutput
	attempt int             // names the batch files (batchFile)
	prog    *walkProgress   // ticked per entry added
	ctx     context.Context // no batch is written once it is done
	// writes encodes and writes full batches while discovery goes on,
	// two at a time.
	writes errgroup.Group
	// unnamed counts the paths not taken for their names (unnamable).
	unnamed int
}

// maxUnnamable bounds the paths a discovery reports skipped for their
// names (DiscoverOutput.Failed travels in one activity result).
const maxUnnamable = 1000

func (w *batchWriter) add(rule int, e batchEntry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !utf8.ValidString(e.Path) || !utf8.ValidString(e.OldPath) {
		w.noteUnnamable(e.Path)
		return nil
	}
	if w.open == nil {
		w.open, w.openSz = map[int][]batchEntry{}, map[int]int64{}
	}
	if w.open[rule] == nil {
		w.open[rule] = make([]batchEntry, 0, min(w.size, 1024))
	}
	w.open[rule] = append(w.open[rule], e)
	w.prog.tick()
	w.openSz[rule] += e.Size
	w.out.Files++
	w.out.Bytes += e.Size
	if w.auto {
		w.size = min(autoBatchSize(w.out.Files, w.out.Bytes), maxBatchEntries)
	}
	if w.next >= manyBatches {
		w.size, w.bytes, w.auto = maxBatchEntries, max(w.bytes, manyBatchBytes), false
	}
	if len(w.open[rule]) >= w.size || (w.bytes > 0 && w.openSz[rule] >= w.bytes) {
		return w.flush(rule)
	}
	return nil
}

// unnamable tells whether path p cannot be taken for its name, and then
// reports it. Paths travel as JSON text (batch files, Temporal, the hub),
// which turns each byte that is not UTF-8 into U+FFFD: the step would act
// on another file, one whose name holds that character (a reviewer's
// finding: a delete policy removed a file it had not selected).
func (w *batchWriter) unnamable(p string) bool {
	if utf8.ValidString(p) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noteUnnamable(p)
	return true
}

// noteUnnamable reports path p not taken for its name (w.mu held):
// skipped, not failed, since a resubmit of the failures would act on the
// other name too.
func (w *batchWriter) noteUnnamable(p string) {
	if w.unnamed++; w.unnamed > maxUnnamable {
		return
	}
	msg := "not taken: its name is not valid UTF-8, and the hub carries paths as text (rename it)"
	if w.unnamed == maxUnnamable {
		msg += "; later paths so named are skipped without a line of their own"
	}
	w.out.Failed = append(w.out.Failed, Outcome{Path: strings.ToValidUTF8(p, "\uFFFD"), State: OutcomeSkipped, Message: msg})
}

func (w *batchWriter) flush(rule int) error {
	entries := w.open[rule]
	if len(entries) == 0 {
		return nil
	}
	name := batchFile(w.dir, w.next, w.attempt)
	w.writes.Go(func() error {
		buf := make([]byte, 0, len(entries)*(len(entries[0].Path)+64))
		for i := range entries {
			buf = appendBatchEntry(buf, &entries[i])
		}
		if err := w.ctx.Err(); err != nil {
			return err // a stalled attempt, woken, writes nothing beside its retry
		}
		if writingBatch != nil {
			writingBatch(name)
		}
		if err := fsutil.WriteFile(name, buf, 0o644); err != nil {
			return fmt.Errorf("write batch: %w", err)
		}
		return nil
	})
	w.out.Batches = append(w.out.Batches, BatchMeta{Index: w.next, Rule: rule, N: len(entries), Attempt: w.attempt})
	w.next++
	delete(w.open, rule)
	delete(w.openSz, rule)
	return nil
}

// close writes the open batches and waits until every batch is written.
func (w *batchWriter) close(rules int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := 0; r < rules; r++ {
		if err := w.flush(r); err != nil {
			return err
		}
	}
	return w.writes.Wait()
}

// Discover finds a job's paths and writes them as batch files grouped by
// the first filter rule each matches (entries matching none are not part
// of the job). It heartbeats while it runs and is safe to retry: a retry
// rewrites the same run's batches from scratch.
func (a *Activities) Discover(ctx context.Context, in DiscoverInput) (*DiscoverOutput, error) {
	dir := a.jobDir(in.JobID, in.Run)
	if in.FirstBatch == 0 {
		_ = os.RemoveAll(dir) // a retried discovery starts clean
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	size := in.BatchSize
	if size <= 0 {
		size = defaultBatchSize
	}
	size = min(size, maxBatchEntries)
	ctx, prog := withProgress(ctx)
	w := &batchWriter{dir: dir, next: in.FirstBatch, size: size, bytes: in.BatchBytes, auto: in.AutoBatch, prog: prog}
	if in.AttemptNames {
		w.attempt = attemptOf(ctx)
	}
	w.writes.SetLimit(2)
	defer func() { _ = w.writes.Wait() }() // no write outlives a failed attempt
	// A walk that writes no batch for a while (globs or rules matching
	// little, a snapdiff of an unchanged tree) still heartbeats: otherwise
	// each attempt timed out, and its retry walked beside it. One that
	// reads nothing (hung on a dead NFS server) stops, and is retried.
	var closeErr error // writing the last batches
	err := beatWhileMoving(ctx, prog.n.Load, func() any { return "discovering" }, func(ctx context.Context) error {
		w.ctx = ctx
		if err := a.discoverInto(ctx, in, w, size); err != nil {
			return err
		}
		closeErr = w.close(len(in.Rules))
		return nil
	})
	if app := (*temporal.ApplicationError)(nil); errors.As(err, &app) {
		return nil, err // refused for good (a policy, a snapdiff of two paths)
	}
	if err != nil {
		if errors.Is(err, ErrOutsideRoot) || errors.Is(err, ErrReserved) || errors.Is(err, ErrManagedPathChanged) || os.IsNotExist(errors.Unwrap(err)) {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadPath, err)
		}
		return nil, fmt.Errorf("discover: %w", err)
	}
	if closeErr != nil {
		return nil, closeErr
	}
	return &w.out, nil
}

// manifestDir holds the site's snapdiff manifests.
func (a *Activities) manifestDir() string { return filepath.Join(a.Root.Dir(), hubDir, "manifests") }

// discoverInto runs in's discovery into w, in batches of at most size.
func (a *Activities) discoverInto(ctx context.Context, in DiscoverInput, w *batchWriter, size int) (err error) {
	switch in.Mode {
	case "recursive":
		// A given path the site cannot take (missing, through a symlink,
		// reserved) fails alone; the others are walked.
		var walk []string
		refused := map[string]bool{}
		for _, p := range in.Paths {
			if err := a.checkGiven(p); err != nil {
				if !refused[p] {
					refused[p] = true
					w.out.Failed = append(w.out.Failed, Outcome{Path: p, State: OutcomeFailure, Message: a.pathMessage(err)})
				}
				continue
			}
			walk = append(walk, p)
			if e, _, err := a.Root.Stat(p); in.Retry && err == nil && e.Type == TypeDirectory {
				w.out.Failed = append(w.out.Failed, Outcome{Path: p, State: OutcomeSkipped, Message: "walked: the paths in it are the job's"})
			}
		}
		if len(walk) == 0 {
			break
		}
		// A resubmit walks its failed paths again (a folder refused in
		// the first run, not mounted then, is walked now), leaving out
		// the paths a left-over batch already holds.
		queued, err2 := a.batchPaths(ctx, in.JobID, in.Skip)
		if err2 != nil {
			return err2
		}
		err = Walk(ctx, a.Root, walk, WalkOptions{Include: in.Include, Exclude: in.Exclude,
			BatchSize: size, BatchBytes: in.BatchBytes, AutoBatch: in.AutoBatch}, func(batch []Entry) error {
			for _, e := range batch {
				if queued[e.Path] {
					continue
				}
				if r := matchRule(in.Rules, e.Type, e.State); r >= 0 {
					if err := w.add(r, batchEntry{Path: e.Path, Type: e.Type, State: e.State, Size: e.Size}); err != nil {
						return err
					}
				}
			}
			return nil
		})
	case "snapdiff":
		if len(in.Paths) != 1 {
			return temporal.NewNonRetryableApplicationError("snapdiff discovery needs exactly one managed path", vocab.ErrBadInput, nil)
		}
		var res *SnapdiffResult
		res, err = Snapdiff(ctx, a.Root, in.Paths[0], a.manifestDir(), func(batch []DiffEntry) error {
			for _, d := range batch {
				if r := matchRule(in.Rules, d.Type, d.State); r >= 0 || d.Change == Deleted {
					e := batchEntry{Path: d.Path, Type: d.Type, State: d.State, Size: d.Size, Change: d.Change, OldPath: d.OldPath}
					if d.Change == Deleted {
						e.Mtime = d.Mtime.UnixNano()
					}
					if err := w.add(max(r, 0), e); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if res != nil {
			w.out.Snapdiff = res.Pending
		}
	case "policy":
		err = a.discoverPolicy(ctx, in, w)
	case "":
		if in.Policy != nil {
			err = a.rediscoverPolicy(ctx, in, w)
			break
		}
		// A path given twice (or as "/a" and "/a/") is one path of the job.
		seen, err2 := a.batchPaths(ctx, in.JobID, in.Skip)
		if err2 != nil {
			return err2
		}
		for _, p := range in.Paths {
			e, _, statErr := a.Root.Stat(p)
			if statErr != nil {
				if !seen[p] {
					seen[p] = true
					w.out.Failed = append(w.out.Failed, Outcome{Path: p, State: OutcomeFailure, Message: a.pathMessage(statErr)})
				}
				continue
			}
			if seen[e.Path] {
				continue
			}
			seen[e.Path] = true
			if r := matchRule(in.Rules, e.Type, e.State); r >= 0 {
				if err = w.add(r, batchEntry{Path: e.Path, Type: e.Type, State: e.State, Size: e.Size}); err != nil {
					break
				}
			}
		}
	default:
		return temporal.NewNonRetryableApplicationError("unknown discovery "+in.Mode, vocab.ErrBadInput, nil)
	}
	return err
}

// checkGiven says why the site cannot walk given path p, or nil: p is
// missing, reaches through a symlink or outside the root, or names a
// reserved file.
func (a *Activities) checkGiven(p string) error {
	if _, err := cleanRel(p); err != nil {
		return err
	}
	_, err := (&walker{root: a.Root}).describe(p)
	return err
}

// errSymlinkSpace: a policy's space folder is a symlink.
var errSymlinkSpace = errors.New("the folder is a symlink, which a policy scan does not follow: name the folder it leads to")

// isSymlink tells whether the given path p (checked) is a symlink.
func (a *Activities) isSymlink(p string) bool {
	it, err := (&walker{root: a.Root}).describe(p)
	return err == nil && it.Type == TypeSymlink
}

// pathMessage is err's text for the API, with the site's root folder left
// out: files are named as the API names them.
func (a *Activities) pathMessage(err error) string {
	return strings.ReplaceAll(err.Error(), a.Root.Dir()+"/", "/")
}

// batchPaths returns the paths held by the given batch files.
func (a *Activities) batchPaths(ctx context.Context, jobID int64, refs []vocab.BatchRef) (map[string]bool, error) {
	seen := map[string]bool{}
	prog := progressIn(ctx)
	for _, b := range refs {
		prog.tick()
		entries, err := readBatch(batchFile(a.jobDir(jobID, b.Run), b.Index, b.Attempt))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, e := range entries {
			seen[e.Path] = true
		}
	}
	return seen, nil
}

// TargetSpec is an external target as a job passes it to a site. Secrets
// arrive sealed (see vocab.Cipher) and are opened here with the site
// worker's secret key.
type TargetSpec struct {
	Name           string
	LocalFileRegex string
	DeleteOnRecall bool
	Config         targets.Config
	SecretsTable   string
	Secrets        map[string]string // secret field -> sealed value
}

// StepInput runs one step of a rule's chain over one batch.
type StepInput struct {
	JobID        int64
	Run          int // run whose batch file this is
	InRun        int // run this step is part of (0: Run); see journalFile
	Batch        int
	BatchAttempt int `json:",omitempty"` // see batchFile
	Step         int // index in the rule's action chain
	Name         string
	Params       map[string]any
	Targets      []TargetSpec
	// FailedAtDestination: paths the previous step (a send or a site_sync)
	// journaled as done here and its destination then failed. They are
	// left out as failures of that step are: a delete after a send must
	// not remove a file the destination does not have.
	FailedAtDestination []string `json:",omitempty"`
	// Include and Exclude are the job's globs, the site's and the job's,
	// as its discovery used them: a delete removes no folder that holds
	// a path they keep out of the job (a rule of type "all" hands it the
	// folders a recursive discovery found).
	Include []string `json:",omitempty"`
	Exclude []string `json:",omitempty"`
}

// StepOutput has one outcome per path the step handled.
type StepOutput struct {
	Outcomes []Outcome
}

// stepChunk is how many paths run between journal writes: a retried step
// redoes at most this many paths, and those find their work already done.
const stepChunk = 100

// RunStep runs one step over one batch. Paths that failed the previous step
// of the chain are left out. Outcomes are journaled on the site as chunks
// finish, so a retry after a crash resumes where the journal ends and
// every path is reported exactly once.
func (a *Activities) RunStep(ctx context.Context, in StepInput) (*StepOutput, error) {
	dir := a.jobDir(in.JobID, in.Run)
	entries, err := readBatch(batchFile(dir, in.Batch, in.BatchAttempt))
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("batch %d of job %d: %v", in.Batch, in.JobID, err), vocab.ErrMissingBatch, err)
	}
	if in.Step == 0 && in.InRun != 0 && in.InRun != in.Run {
		if err := retireOldJournals(dir, in); err != nil {
			return nil, err
		}
	}
	if in.Step > 0 {
		prev, err := readOutcomes(journalFile(dir, in, in.Step-1))
		if err != nil {
			return nil, err
		}
		ok := map[string]bool{}
		for _, o := range prev {
			ok[o.Path] = o.State == OutcomeSuccess
		}
		for _, p := range in.FailedAtDestination {
			ok[p] = false
		}
		kept := entries[:0]
		for _, e := range entries {
			if ok[e.Path] {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	journal := journalFile(dir, in, in.Step)
	done, err := readOutcomes(journal)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(done))
	for _, o := range done {
		seen[o.Path] = true
	}
	var todo []batchEntry
	for _, e := range entries {
		if !seen[e.Path] {
			todo = append(todo, e)
		}
	}
	run, err := a.stepFunc(in)
	if err != nil {
		return nil, err
	}
	defer a.Metrics.timed(a.Site, in.Name)()
	run = a.Metrics.counted(a.Site, in.Name, run)
	// The heartbeat says how far the step is, path by path (StepProgress).
	rep := newStepReporter(ctx, in, entries)
	size := make(map[string]int64, len(entries))
	for _, e := range entries {
		size[e.Path] = e.Size
	}
	rep.journaled(done, size)
	ctx = context.WithValue(ctx, stepReporterKey{}, rep)
	for lo := 0; lo < len(todo); lo += stepChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunk := todo[lo:min(lo+stepChunk, len(todo))]
		outs, err := run(ctx, chunk)
		if err != nil {
			return nil, err
		}
		if err := appendOutcomes(journal, outs); err != nil {
			return nil, err
		}
		done = append(done, outs...)
		rep.journaled(outs, size)
	}
	return &StepOutput{Outcomes: withSizes(done, entries)}, nil
}

type chunkFunc func(ctx context.Context, chunk []batchEntry) ([]Outcome, error)

// stepFunc binds a step name and its parameters to the storage functions.
func (a *Activities) stepFunc(in StepInput) (chunkFunc, error) {
	opts := StepOptions{
		Overwrite:      boolParam(in.Params, "overwrite"),
		StubSize:       int64(numParam(in.Params, "stub_size")),
		DeleteOnRecall: boolParam(in.Params, "delete_on_recall"),
		DeleteRemote:   boolParam(in.Params, "remote"),
		Include:        in.Include,
		Exclude:        in.Exclude,
	}
	drivers := a.drivers(in.Targets)
	heartbeat := stepBeat
	byPath := func(f func(ctx context.Context, paths []string, o StepOptions) ([]Result, error)) chunkFunc {
		return func(ctx context.Context, chunk []batchEntry) ([]Outcome, error) {
			o := opts
			o.Progress = heartbeat(ctx)
			res, err := f(ctx, entryPaths(chunk), o)
			return toOutcomes(res), err
		}
	}
	switch in.Name {
	case "premigrate", "migrate":
		step := Premigrate
		if in.Name == "migrate" {
			step = Migrate
			if v, ok := in.Params["premigrate"].(bool); ok && v {
				step = Premigrate // "migrate" with premigrate=true keeps the data resident
			}
		}
		named, _ := in.Params["target"].(string)
		return func(ctx context.Context, chunk []batchEntry) ([]Outcome, error) {
			groups, outs := drivers.pick(chunk, named)
			o := opts
			o.Progress = heartbeat(ctx)
			for name, paths := range groups {
				d, err := drivers.get(name)
				if err != nil {
					outs = append(outs, failAll(paths, err)...)
					continue
				}
				res, err := step(ctx, a.Root, paths, d, name, o)
				if err != nil {
					return nil, err
				}
				outs = append(outs, toOutcomes(res)...)
			}
			return outs, nil
		}, nil
	case "send", "site_sync":
		return a.sendChunk(in, drivers), nil
	case "recall":
		return byPath(func(ctx context.Context, paths []string, o StepOptions) ([]Result, error) {
			return Recall(ctx, a.Root, paths, drivers.get, o)
		}), nil
	case "reverse_stub":
		return byPath(func(ctx context.Context, paths []string, o StepOptions) ([]Result, error) {
			return ReverseStub(ctx, a.Root, paths, drivers.get, o)
		}), nil
	case "delete":
		return byPath(func(ctx context.Context, paths []string, o StepOptions) ([]Result, error) {
			return Delete(ctx, a.Root, paths, drivers.get, o)
		}), nil
	}
	return nil, temporal.NewNonRetryableApplicationError("unknown step "+in.Name, vocab.ErrBadInput, nil)
}

// CleanupJob removes a job's batch files once the job no longer needs them.
func (a *Activities) CleanupJob(ctx context.Context, jobID int64) error {
	return os.RemoveAll(filepath.Dir(a.jobDir(jobID, 0)))
}

// CleanupJobs removes the batch files of deleted or purged jobs.
func (a *Activities) CleanupJobs(ctx context.Context, jobIDs []int64) error {
	for _, id := range jobIDs {
		if err := a.CleanupJob(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// CommitSnapdiff makes a snapdiff job's manifest the base of the next run.
func (a *Activities) CommitSnapdiff(ctx context.Context, pending string) error {
	if pending == "" {
		return nil
	}
	if filepath.Dir(pending) != a.manifestDir() {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("snapdiff: %q is not in this site's manifests folder", pending), vocab.ErrBadInput, nil)
	}
	return CommitSnapdiff(pending)
}

// driverSet opens each target once per activity.
type driverSet struct {
	mu     sync.Mutex
	cipher *vocab.Cipher
	specs  []TargetSpec
	opened map[string]targets.Driver
	regex  map[string]*regexp.Regexp
	seen   string // targets.Config.Seen
}

func newDriverSet(specs []TargetSpec, c *vocab.Cipher) *driverSet {
	return &driverSet{specs: specs, cipher: c, opened: map[string]targets.Driver{}, regex: map[string]*regexp.Regexp{}}
}

// drivers is the site's driver set for specs: the filesystem targets it
// opens are checked against the ones the site used before, so that one
// whose volume is not mounted is not written to.
func (a *Activities) drivers(specs []TargetSpec) *driverSet {
	s := newDriverSet(specs, a.Cipher)
	s.seen = a.targetMemory()
	return s
}

// targetMemory is the folder where the site remembers the filesystem
// targets it has used (targets.Config.Seen).
func (a *Activities) targetMemory() string { return filepath.Join(a.Root.Dir(), hubDir, "targets") }

// flush flushes every target opened so far (flushTarget).
func (s *driverSet) flush(ctx context.Context) error {
	s.mu.Lock()
	opened := maps.Clone(s.opened)
	s.mu.Unlock()
	for name, d := range opened {
		if err := flushTarget(ctx, d); err != nil {
			return fmt.Errorf("flush target %s: %w", name, err)
		}
	}
	return nil
}

func (s *driverSet) get(name string) (targets.Driver, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.opened[name]; ok {
		return d, nil
	}
	for _, t := range s.specs {
		if t.Name == name {
			cfg := t.Config
			if len(t.Secrets) > 0 {
				if s.cipher == nil {
					return nil, fmt.Errorf("target %q has credentials but this site worker has no secret key (HUB_SECRET_KEY)", name)
				}
				open := func(field string) (string, error) {
					return s.cipher.Open(vocab.SecretColumn(t.SecretsTable, field), t.Secrets[field])
				}
				var err error
				if cfg.AccessKeyID, err = open(vocab.SecretAccessKeyID); err != nil {
					return nil, err
				}
				if cfg.SecretAccessKey, err = open(vocab.SecretSecretAccessKey); err != nil {
					return nil, err
				}
				if cfg.AccessKeyID == "" {
					if cfg.AccessKeyID, err = open(vocab.SecretAccessKey); err != nil {
						return nil, err
					}
				}
			}
			cfg.Seen = s.seen
			d, err := targets.Open(cfg)
			if err != nil {
				return nil, err
			}
			s.opened[name] = d
			return d, nil
		}
	}
	return nil, fmt.Errorf("external target %q is not available to this job", name)
}

// pick groups paths by target: the named one, else the first target whose
// local_file_regex matches the path. Paths no target accepts fail.
func (s *driverSet) pick(chunk []batchEntry, named string) (map[string][]string, []Outcome) {
	groups := map[string][]string{}
	var failed []Outcome
	for _, e := range chunk {
		if named != "" {
			groups[named] = append(groups[named], e.Path)
			continue
		}
		chosen := ""
		for _, t := range s.specs {
			re, ok := s.regex[t.Name]
			if !ok {
				re, _ = regexp.Compile(t.LocalFileRegex)
				s.regex[t.Name] = re
			}
			if re != nil && re.MatchString(e.Path) {
				chosen = t.Name
				break
			}
		}
		if chosen == "" {
			failed = append(failed, Outcome{Path: e.Path, State: OutcomeFailure, Message: "no external target accepts this path (local_file_regex)"})
			continue
		}
		groups[chosen] = append(groups[chosen], e.Path)
	}
	return groups, failed
}

func failAll(paths []string, err error) []Outcome {
	out := make([]Outcome, len(paths))
	for i, p := range paths {
		out[i] = Outcome{Path: p, State: OutcomeFailure, Message: err.Error()}
	}
	return out
}

// toOutcomes maps step results to hub states. A path already in the state
// the step aims for ("already premigrated") counts as a success: the step
// is idempotent and the path is where the job wants it.
func toOutcomes(res []Result) []Outcome {
	out := make([]Outcome, len(res))
	for i, r := range res {
		state := OutcomeSuccess
		switch {
		case r.Code == CodeFailed:
			state = OutcomeFailure
		case r.Code == CodeSkipped && !strings.HasPrefix(r.Message, "already "):
			state = OutcomeSkipped
		}
		out[i] = Outcome{Path: r.Path, State: state, Message: r.Message}
	}
	return out
}

func entryPaths(es []batchEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Path
	}
	return out
}

func boolParam(p map[string]any, k string) bool { v, _ := p[k].(bool); return v }

func numParam(p map[string]any, k string) float64 {
	switch v := p[k].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case json.Number:
		f, _ := v.Float64()
		return f
	}
	return 0
}

func readBatch(name string) ([]batchEntry, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []batchEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e batchEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// readOutcomes reads a journal; a missing journal is empty and a torn last
// line (a crash mid-write) is ignored, its paths are simply redone.
func readOutcomes(name string) ([]Outcome, error) {
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []Outcome
	for _, line := range strings.Split(string(data), "\n") {
		var o Outcome
		if line == "" || json.Unmarshal([]byte(line), &o) != nil {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

func appendOutcomes(name string, outs []Outcome) error {
	// A crash mid-write leaves a torn last line: cut it off first, or the
	// next outcome would be glued to it and lost on reading.
	if data, err := os.ReadFile(name); err == nil && len(data) > 0 && data[len(data)-1] != '\n' {
		if err := os.Truncate(name, int64(strings.LastIndexByte(string(data), '\n')+1)); err != nil {
			return err
		}
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	for _, o := range outs {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(sb.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
