package site

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/fault"
)

// Code is the outcome of a step for one path.
type Code string

// Result codes.
const (
	CodeOK      Code = "ok"
	CodeSkipped Code = "skipped"
	CodeFailed  Code = "failed"
)

// Result is a step's outcome for one path. Steps return one Result per
// input path, in input order.
type Result struct {
	Path    string `json:"path"`
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
}

// TargetFunc returns the driver of a named target; Recall, ReverseStub
// and Delete use it to reach the target recorded with each file.
type TargetFunc func(name string) (targets.Driver, error)

// StepOptions tunes the steps; each field says which steps read it.
type StepOptions struct {
	// Overwrite uploads again even when the file is already premigrated
	// or the target already holds identical content (Premigrate, Migrate),
	// which repairs a damaged remote copy.
	Overwrite bool
	// StubSize is how many leading bytes a migrated file keeps (Migrate).
	StubSize int64
	// DeleteOnRecall makes recalled files resident, dropping their
	// reference to the remote copy, which the collector then frees unless
	// another record refers to it (Recall). Without it a recalled file
	// stays premigrated.
	DeleteOnRecall bool
	// DeleteRemote drops the references to remote copies in the same way
	// (ReverseStub, Delete).
	DeleteRemote bool
	// Include and Exclude are the job's globs (the site's and the job's,
	// as discovery used them: WalkOptions): Delete removes no path they
	// keep out of the job, nor a folder that holds one.
	Include, Exclude []string
	// Workers is the number of paths processed in parallel; default 4.
	Workers int
	// Progress, if set, is called with the number of paths whose data
	// transfer is done. It is also called, with an unchanged count,
	// during long copies, so it can drive heartbeats. Calls are serialised.
	Progress func(done int)
}

const defaultStepWorkers = 4

// progressEvery is how many bytes a copy moves between keepalive calls
// of the progress callback.
const progressEvery = 16 << 20

type progress struct {
	mu   sync.Mutex
	fn   func(int)
	done int
}

func (p *progress) add(n int) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.fn(p.done)
}

func (p *progress) tick() { p.add(0) }

// job is one path travelling through a step's phases. A set res means
// the path is finished.
type job struct {
	in  string
	rel string
	// loc pins the file's folder for the whole step, and abs is its path
	// through the pinned folder (see loc).
	loc *loc
	abs string
	fi  fs.FileInfo
	rec *Record // the file's record, nil when resident
	// prev is the site's record of an earlier version of the file (the
	// file changed since), whose reference a new record supersedes.
	prev *Record
	res  *Result
	next Record // the record to write when the transfer succeeded
	// upload is set when the data was sent to the target in this run.
	upload bool
	// newRef is set when this run added next.Ref to the target.
	newRef bool
	// wroteBack is set when this run wrote the file's data back (Recall),
	// and stubSum is then the SHA-256 of the stub's bytes (see cutBack).
	wroteBack bool
	stubSum   string
	// note is the message of a successful result.
	note string
	// ctime is the change time (ns) of the file as this step last knew
	// it unchanged: when it read the content it records, then right after
	// its own release mark. 0: not known (a release resumed, a system
	// without change times), and the release reads the content again.
	ctime int64
	// heldElsewhere: another program had the file open when its release
	// was marked; the release keeps it whole, and need not read it again.
	heldElsewhere bool
}

func (j *job) finish(code Code, format string, args ...any) {
	j.res = &Result{Path: j.in, Code: code, Message: fmt.Sprintf(format, args...)}
}

// fail finishes the job with err, naming paths as the API does rather
// than by the descriptors they were reached through.
func (j *job) fail(err error) {
	msg := err.Error()
	if j.loc != nil {
		dir := strings.TrimSuffix(path.Dir(apiPath(j.rel)), "/") + "/"
		msg = strings.ReplaceAll(msg, j.loc.parent.Name()+"/", dir)
	}
	j.finish(CodeFailed, "%s", msg)
}

// stepRun holds what every phase of a step needs.
type stepRun struct {
	ctx  context.Context
	root *Root
	opts StepOptions
	prog *progress
	jobs []*job
	refs refGroups
}

func newRun(ctx context.Context, root *Root, paths []string, opts StepOptions) *stepRun {
	if opts.Workers <= 0 {
		opts.Workers = defaultStepWorkers
	}
	s := &stepRun{ctx: ctx, root: root, opts: opts, prog: &progress{fn: opts.Progress}}
	for _, p := range paths {
		s.jobs = append(s.jobs, &job{in: p})
	}
	return s
}

// each runs fn on every unfinished job with opts.Workers goroutines.
// Once ctx is cancelled, jobs not yet started fail as cancelled.
func (s *stepRun) each(fn func(*job)) { s.run(fn, true) }

// finishEach is each for the short local bookkeeping phases that follow
// a transfer: once data has moved, completing them is cheaper and leaves
// fewer half-done files than stopping, so they ignore cancellation.
func (s *stepRun) finishEach(fn func(*job)) { s.run(fn, false) }

func (s *stepRun) run(fn func(*job), cancellable bool) {
	ch := make(chan *job)
	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := s.ctx.Err(); err != nil && cancellable {
					j.finish(CodeFailed, "cancelled: %v", err)
					continue
				}
				fn(j)
			}
		}()
	}
	for _, j := range s.jobs {
		if j.res == nil {
			ch <- j
		}
	}
	close(ch)
	wg.Wait()
}

// results collects the outcome of every job; a job that ran through
// every phase without finishing early succeeded.
func (s *stepRun) results() ([]Result, error) {
	out := make([]Result, len(s.jobs))
	for i, j := range s.jobs {
		if j.loc != nil {
			j.loc.close()
		}
		if j.res == nil {
			j.finish(CodeOK, "%s", j.note)
		}
		out[i] = *j.res
	}
	s.root.indexSteps(s.ctx, s.jobs)
	return out, s.ctx.Err()
}

// open locates the job's path and lstats it; only regular files go on.
func (s *stepRun) open(j *job) bool {
	l, err := s.root.locate(j.in)
	if err != nil {
		if isNotExist(err) {
			j.finish(CodeFailed, "no such file")
		} else {
			j.fail(err)
		}
		return false
	}
	j.loc, j.rel, j.abs = l, l.rel, l.path()
	abs, rel := j.abs, j.rel
	fi, err := os.Lstat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			j.finish(CodeFailed, "no such file")
		} else {
			j.fail(err)
		}
		return false
	}
	if !fi.Mode().IsRegular() {
		j.finish(CodeSkipped, "not a regular file (%s)", typeName(fi.Mode()))
		return false
	}
	j.fi = fi
	rec, err := s.root.record(abs, rel, fi)
	if err != nil {
		j.fail(err)
		return false
	}
	if rec.matches(fi) {
		j.rec = rec
	} else {
		j.prev = rec
	}
	return true
}

// record returns the trusted record of a file, or nil when it is
// resident. A record the site did not write is refused (ErrUntrustedRecord)
// when acting on it could move data: on a file that is not whole, which
// it claims is a stub. On a whole file it is ignored, since the data is
// local and a step records the file afresh.
func (r *Root) record(abs, rel string, fi fs.FileInfo) (*Record, error) {
	rec, err := r.state.get(abs, rel)
	if err != nil && !errors.Is(err, ErrUntrustedRecord) {
		return nil, err
	}
	if rec == nil {
		if err != nil && fi.Size() == 0 {
			return nil, err // unreadable, on what may be an empty stub
		}
		return nil, nil
	}
	stale, err := r.state.trust(rec, inode(fi), func() int64 { return birthTime(abs) })
	switch {
	case err == nil && stale:
		return nil, nil
	case err == nil:
		return rec, nil
	case rec.State == Migrated && fi.Size() != rec.Size:
		return nil, fmt.Errorf("%s: %w; nothing was moved", apiPath(rel), err)
	}
	return nil, nil
}

func typeName(m fs.FileMode) string {
	if t := typeOf(m); t != "" {
		return t
	}
	return m.Type().String()
}

// unchanged reports whether the file still is the one the job saw.
func (j *job) unchanged(fi fs.FileInfo) bool { return !changed(fi, j.fi) }

// fileLocks serialize, within this process, the steps that check a
// file's record and then change the file or its record (a migrate's
// release, a recall's end), so that no other step's record comes between
// the check and the change. Striped by inode. Across the site's worker
// processes, Root.lockFile adds a lock of the inode's byte of the
// root's lock file.
var fileLocks [64]sync.Mutex

// fileLockFile is, in the root's .hub folder, the file whose bytes lock
// the files of the same inode numbers (see Root.lockFile).
const fileLockFile = hubDir + "/file-locks"

// lockFile locks the file fi describes (see fileLocks) within this
// process and against the site's other worker processes, on this host or
// on another sharing the root over NFS: the byte at the file's inode
// number of fileLockFile, an open file description lock (byteLock). Two
// files of one inode number on two filesystems beneath the root share it,
// which only makes one wait for the other. It returns the unlock.
func (r *Root) lockFile(fi fs.FileInfo) (unlock func(), err error) {
	m := &fileLocks[inode(fi)%uint64(len(fileLocks))]
	m.Lock()
	lf, err := r.fileLockFile()
	if err == nil {
		err = byteLock(lf, int64(inode(fi)&(1<<62-1)))
	}
	if err != nil {
		m.Unlock()
		return nil, fmt.Errorf("lock the file against the site's other workers: %w", err)
	}
	return func() { byteUnlock(lf, int64(inode(fi)&(1<<62-1))); m.Unlock() }, nil
}

// fileLockFile opens the root's fileLockFile once.
func (r *Root) fileLockFile() (*os.File, error) {
	r.locksOnce.Lock()
	defer r.locksOnce.Unlock()
	if r.locks != nil {
		return r.locks, nil
	}
	if err := mkdirBeneath(r.f, hubDir, 0o755); err != nil {
		return nil, err
	}
	f, err := openBeneath(r.f, fileLockFile, os.O_RDWR|os.O_CREATE|openNoFollow, 0o600)
	if err != nil {
		return nil, err
	}
	r.locks = f
	return f, nil
}

// errRecallInterrupted: a file marked "recall in progress" holds the
// data's first bytes, or whatever its user wrote since (any size up to
// the data's passes for a recall's): it is neither taken for a stub nor
// copied as it is until a recall has looked.
var errRecallInterrupted = errors.New("a recall of it was interrupted, and it may have been written since: recall it first")

// errRecordChanged: between a step's look at a file and its change of
// the file's record, another file took its name or another step recorded
// it; that record is not the step's to change.
var errRecordChanged = errors.New("the file was replaced at its path, or another step recorded it, meanwhile: its record is left as it is")

// recordStill checks, under the file's lock, that the file at j.abs (fi,
// as it is now) is still j's (the same inode) and that its record is
// still want, as this step read or wrote it (every field but the
// signature). The record is compared, not trusted again (signature, birth
// time): one equal to want leads to what want would.
func (s *stepRun) recordStill(j *job, fi fs.FileInfo, want Record) error {
	if device(fi) != device(j.fi) || inode(fi) != inode(j.fi) {
		return errRecordChanged
	}
	cur, err := s.root.state.get(j.abs, j.rel)
	if err == nil && cur == nil {
		// An index record follows its file's folder (see follow).
		if now, ok := s.root.state.whereNow(j.abs); ok && now != j.rel {
			cur, err = s.root.state.get(j.abs, now)
		}
	}
	if err != nil {
		return err
	}
	if cur == nil || !sameRecord(*cur, want) {
		return errRecordChanged
	}
	return nil
}

// recordFirst writes rec, the first record a step writes for j's file
// (a premigrate's record, a migrate's release mark), under the file's
// lock (see lockFile) and only while the file is unchanged since the
// step opened it: another worker's migrate may have released it meanwhile
// (a reviewer's finding: the record of the whole file, written over the
// stub's, made it read as a resident file of the stub's size, whose next
// migrate let the content go). changed is the error of a file changed.
func (s *stepRun) recordFirst(j *job, rec Record, changed error, mark bool) error {
	unlock, err := s.root.lockFile(j.fi)
	if err != nil {
		return err
	}
	defer unlock()
	fi, err := os.Lstat(j.abs)
	if err != nil {
		return err
	}
	if !j.unchanged(fi) {
		return changed
	}
	if j.ctime != 0 && changeTime(fi) != j.ctime {
		// Changed since it was read, or only touched (another worker's
		// record of it, a chmod): read again.
		ctime, same, err := s.contentIs(j, rec.Checksum)
		if err != nil {
			return err
		}
		if !same {
			return changed
		}
		j.ctime = ctime
	}
	if !mark || !s.root.state.xattr {
		// A premigrate's record: no release holds the file to a time.
		// One in the state index leaves the file's change time alone: the
		// same time before and after it says that no save came between.
		before := changeTime(fi)
		if err := s.root.state.set(j.abs, j.rel, rec); err != nil {
			return err
		}
		if now, err := os.Lstat(j.abs); err != nil || !j.unchanged(now) || changeTime(now) != before {
			j.ctime = 0
		}
		return nil
	}
	// A release mark in the file's attributes, which moves its change
	// time, is written under a lease where the kernel grants one (taken on
	// a read-only descriptor: no close-after-write event for watchers): no
	// save can come between the look at the time before it and the one
	// after it, which the release then holds the file to. Without one (NFS;
	// another program has the file open, and the release keeps it whole),
	// the time after is unknown (a reviewer's finding: a save during the
	// mark was taken into the time after it, and cut).
	f, err := fsutil.OpenFile(j.abs, os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0)
	leased := false
	if err == nil {
		defer f.Close()
		switch err := exclusiveLease(f); {
		case errors.Is(err, errOpenElsewhere):
			j.heldElsewhere = true
		case err == nil && leaseHeld(f):
			now, err := f.Stat()
			if err != nil || !j.unchanged(now) || (j.ctime != 0 && changeTime(now) != j.ctime) {
				return changed
			}
			leased = true
		}
	}
	if err := s.root.state.set(j.abs, j.rel, rec); err != nil {
		return err
	}
	j.ctime = 0
	if leased {
		if now, err := f.Stat(); err == nil && j.unchanged(now) && leaseHeld(f) {
			j.ctime = changeTime(now)
		}
	}
	return nil
}

// sameRecord compares two records but for their signatures and where
// they were read from.
func sameRecord(a, b Record) bool {
	a.Sig, b.Sig, a.fromXattr, b.fromXattr = "", "", false, false
	return a == b
}

// Premigrate copies files to target and records them as premigrated:
// for each file it hashes the data, uploads it (unless the target already
// holds identical content and Overwrite is off), verifies what the target
// stored, and once the whole batch is on the target (flushed, for targets
// that buffer) writes the premigrated records. Files already premigrated
// to the same key, or migrated, are skipped.
func Premigrate(ctx context.Context, root *Root, paths []string, target targets.Driver, targetName string, opts StepOptions) ([]Result, error) {
	s := newRun(ctx, root, paths, opts)
	s.transfer(target, targetName, false)
	s.finishEach(func(j *job) {
		if err := s.recordFirst(j, j.next, errors.New("file changed during premigration"), false); err != nil {
			s.abandon(j, target, err)
			return
		}
		fault.Point("premigrate.recorded")
		s.supersede(j, target, targetName)
	})
	return s.results()
}

// abandon fails a job whose new record will not be written, dropping the
// reference it added (a crash instead leaves the reference, which only
// keeps the remote copy).
func (s *stepRun) abandon(j *job, target targets.Driver, err error) {
	if j.newRef {
		_ = s.dropRefUnlessRecorded(j, target, j.next)
	}
	j.fail(err)
}

// dropRefUnlessRecorded drops rec's reference unless the file's current
// record, one the site trusts, names it: the reference is named by the
// file and its content, so another worker's step on the same file (a
// retry started while the first attempt still ran) may have recorded it
// meanwhile, and released the file onto it. The record is read before the
// drop and again after it, and a reference recorded in between is written
// back: gone for that instant, it costs nothing, since the collector
// deletes content only after a grace period in which it looks again.
func (s *stepRun) dropRefUnlessRecorded(j *job, target targets.Driver, rec Record) error {
	ctx := context.WithoutCancel(s.ctx)
	recorded := func() *Record {
		fi, err := os.Lstat(j.abs)
		if err != nil {
			return nil
		}
		if cur, err := s.root.record(j.abs, j.rel, fi); err == nil && cur != nil && cur.Ref == rec.Ref {
			return cur
		}
		return nil
	}
	if recorded() != nil {
		return nil
	}
	if err := dropRef(ctx, target, rec); err != nil {
		return err
	}
	if cur := recorded(); cur != nil {
		// The other attempt may have released the file already, trusting
		// the reference it flushed, which the drop just removed: the one
		// written back must be as durable before this returns.
		if err := s.root.addRef(ctx, target, cur.Checksum, cur.Ref, j.rel, cur.Ino); err != nil {
			return err
		}
		return flushTarget(ctx, target)
	}
	return nil
}

// supersede drops the reference of the record that the job's new record
// replaced (the file changed since it was recorded), after the new record
// is written, so that the old copy can be collected.
func (s *stepRun) supersede(j *job, target targets.Driver, targetName string) {
	if p := j.prev; p != nil && p.Target == targetName && p.Ref != j.next.Ref {
		_ = s.dropRefUnlessRecorded(j, target, *p)
	}
}

// Migrate premigrates files (see Premigrate) and then releases their data,
// leaving stubs: each file is truncated to StubSize bytes, its original
// mtime restored, and its record set to migrated. A file already
// premigrated to the same key is not uploaded again, but its remote copy
// is checked before the local data goes.
func Migrate(ctx context.Context, root *Root, paths []string, target targets.Driver, targetName string, opts StepOptions) ([]Result, error) {
	s := newRun(ctx, root, paths, opts)
	s.transfer(target, targetName, true)
	if s.ctx.Err() != nil {
		// Uploaded data stays on the target; a retry finds it there.
		return s.cancelRest()
	}
	// Phase 1: mark every file as being released. The marks are made
	// durable before any data is destroyed, so a crash can only leave
	// files that a rerun recognises and finishes.
	var marked written
	s.finishEach(func(j *job) {
		fi, err := os.Lstat(j.abs)
		if err != nil {
			j.fail(err)
			return
		}
		if j.next.Pending == pendingRelease {
			marked.add(s.root, j.rel, fi) // by an attempt that may not have flushed
			return                        // resuming: already marked, maybe already truncated
		}
		j.next.State, j.next.Pending = Migrated, pendingRelease
		j.next.StubSize = min(max(s.opts.StubSize, 0), j.next.Size)
		if err := s.recordFirst(j, j.next, errors.New("file changed during migration"), true); err != nil {
			s.abandon(j, target, err)
			return
		}
		marked.add(s.root, j.rel, fi)
		fault.Point("migrate.marked")
		s.supersede(j, target, targetName)
	})
	if err := s.root.state.sync(); err != nil {
		s.failRest(err)
	}
	// Marks in the files' attributes: a filesystem with a metadata
	// journal commits them before the truncations that follow, one
	// without (ext2, ext4 without a journal) need not, and a power cut
	// would leave stubs without records, whose references an audit
	// then drops. One flush makes them durable first.
	if s.root.state.xattr {
		if err := marked.flush(s.root); err != nil {
			s.failRest(fmt.Errorf("flush release marks: %w", err))
		}
	}
	// Phase 2: truncate, restore the mtime, and drop the pending mark.
	s.finishEach(func(j *job) {
		if err := s.keepRef(j, target); err != nil {
			j.fail(fmt.Errorf("not released: %w", err))
			return
		}
		if err := s.release(j, target); err != nil {
			if errors.Is(err, errChangedNotReleased) {
				// The record is gone, so nothing refers to the copy.
				_ = s.dropRefUnlessRecorded(j, target, j.next)
			}
			j.fail(err)
		}
	})
	return s.results()
}

// keepRef checks, right before the file's data is released, that the
// reference its record names is on the target, and writes it back (with
// the content, from the target's trash) if it is not: another worker on
// the same file, which names the same reference, may have dropped it
// after this step wrote it and before this step's record was there to
// tell it not to (see dropRefUnlessRecorded).
func (s *stepRun) keepRef(j *job, target targets.Driver) error {
	rec := j.next
	if !rec.contentAddressed() {
		return nil
	}
	if ok, err := hasRef(s.ctx, target, rec); err != nil || ok {
		return err
	}
	if err := s.root.addRef(s.ctx, target, rec.Checksum, rec.Ref, j.rel, rec.Ino); err != nil {
		return err
	}
	if ok, err := ensureContent(s.ctx, target, rec.Checksum, rec.Size); err != nil || !ok {
		return errors.Join(errors.New("the remote copy is gone"), err)
	}
	return flushTarget(s.ctx, target) // both durable before the release
}

// flushTarget makes what was written to the target durable, on targets
// that buffer (targets.Syncer). A variable: tests see when it runs.
var flushTarget = func(ctx context.Context, target targets.Driver) error {
	if syncer, ok := target.(targets.Syncer); ok {
		return syncer.Sync(context.WithoutCancel(ctx))
	}
	return nil
}

// beforeCut, nil outside tests, is called right before a release's last
// look at the file and its truncation.
var beforeCut func(abs string)

// errChangedNotReleased: the user wrote to a file being migrated; their
// data wins and the file is resident again.
var errChangedNotReleased = errors.New("file changed during migration; not released")

// release truncates the file of a job marked pendingRelease, while it is
// still the file marked and its record still this step's mark.
func (s *stepRun) release(j *job, target targets.Driver) error {
	// A file at its stub's size may be one an earlier release cut (see
	// stubBytes): the data's first bytes are read from the target before
	// the lock and the lease, which a slow target would hold for long.
	stub, err := s.stubSum(j, target)
	if err != nil {
		return err
	}
	// A whole file whose change time since this step read it is unknown
	// (a resumed release) or moved (a chmod, another worker's record) is
	// read again, before the lock and the lease: nothing long runs under
	// them (a reviewer's finding: a user's write during a hash under them
	// was then cut, or held up to the lease break time).
	differs, unreadable := false, false
	if j.heldElsewhere {
		// Closed since the mark (a brief open: an indexer, a backup agent)?
		// Then it is read again, as a free file, rather than failed.
		if p, err := fsutil.OpenFile(j.abs, os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0); err == nil {
			if !errors.Is(exclusiveLease(p), errOpenElsewhere) {
				j.heldElsewhere = false
			}
			p.Close()
		}
	}
	if fi, err := os.Lstat(j.abs); err == nil && fi.Size() == j.next.Size && changeTime(fi) != j.ctime && !j.heldElsewhere {
		ctime, same, err := s.contentIs(j, j.next.Checksum)
		switch {
		case errors.Is(err, fs.ErrPermission):
			// Unreadable to this worker (root_squash): by size and
			// mtime, as before.
			unreadable = true
		case err != nil:
			return err
		case same:
			j.ctime = ctime
		case ctime != 0:
			differs = true // read whole: another content, the user's
		default:
			return errors.New("not released yet: the file changed while it was read again; the next attempt reads it again")
		}
	}
	unlock, err := s.root.lockFile(j.fi)
	if err != nil {
		return err
	}
	defer unlock()
	// Read too where it may (see stubSum): a second open of the file
	// would break the lease taken below. Not the user's access (atime).
	f, err := fsutil.OpenFile(j.abs, os.O_RDWR|openNoFollow|fsutil.NoAtime, 0)
	readable := err == nil
	if errors.Is(err, fs.ErrPermission) {
		// Without blocking: a FIFO swapped in would wait for a reader
		// (ENXIO instead; see openUserFile), and another program's lease
		// says so at once.
		f, err = fsutil.OpenFile(j.abs, os.O_WRONLY|openNoFollow|syscall.O_NONBLOCK, 0)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			err = errOpenElsewhere
		}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// The lease is granted only while no other descriptor of the file is
	// open, and held, it keeps every other open waiting until f is closed:
	// no write can come between the check below and the truncation, nor
	// through a descriptor opened before.
	inUse := exclusiveLease(f)
	leased := inUse == nil && leaseHeld(f) // none where the kernel grants none
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := s.recordStill(j, fi, j.next); err != nil {
		return err
	}
	rec := j.next
	// Last check before data is destroyed: the file must still be the
	// one uploaded (or, resuming, be either side of the truncate).
	if !rec.matches(fi) || (fi.Size() == rec.Size && fi.ModTime().UnixNano() != rec.Mtime) {
		// The user wrote to the file: their data wins and it is resident.
		_ = s.root.state.clear(j.abs, j.rel)
		return errChangedNotReleased
	}
	whole := fi.Size() == rec.Size
	if whole {
		// Still the content uploaded: a save of the same size, its mtime
		// set back, has the size and the mtime of the upload (a
		// reviewer's finding); its change time moved (see job.ctime).
		switch {
		case differs:
			_ = s.root.state.clear(j.abs, j.rel)
			return errChangedNotReleased
		case !unreadable && changeTime(fi) != j.ctime && inUse == nil: // open elsewhere: kept whole below
			// Changed since it was read, or never read (a resumed release
			// whose file was being rewritten at the look before the
			// lock: a reviewer's finding).
			return errors.New("not released yet: the file changed while the release began; the next attempt reads it again")
		}
	}
	if !whole && rec.StubSize > 0 && readable {
		if stub == "" {
			return errors.New("not released yet: the file was cut to its stub's size while the release began; the next attempt compares its bytes with the data's")
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, rec.StubSize)); err != nil {
			return err
		}
		if hex.EncodeToString(h.Sum(nil)) != stub {
			_ = s.root.state.clear(j.abs, j.rel)
			return errChangedNotReleased
		}
	}
	switch n := links(fi); {
	case inUse != nil && whole:
		return s.keepWhole(j, rec, inUse)
	case inUse != nil: // truncated by an interrupted release: the mark stays
		return fmt.Errorf("not released yet: %w", inUse)
	case n > 1 && whole:
		// Truncating would make a stub of every name, and only this one
		// is known to the hub.
		return s.keepWhole(j, rec, fmt.Errorf("the file has %d names (hard links), and releasing it would turn every one into a stub", n))
	case whole && hasCapabilities(f):
		// The kernel drops them at the truncation (and at a recall's
		// write), even for root: a reviewer's finding.
		return s.keepWhole(j, rec, errors.New("the file carries capabilities (security.capability), which cutting its data would drop"))
	}
	// Nothing of the checks above may have moved since (with no lease, a
	// write could come; a lease broken by the kernel lets it through).
	if beforeCut != nil {
		beforeCut(j.abs)
	}
	if now, err := f.Stat(); err != nil || changed(now, fi) || changeTime(now) != changeTime(fi) || (leased && !leaseHeld(f)) {
		return errors.New("not released yet: the file changed while the release checked it; the next attempt reads it again")
	}
	if err := f.Truncate(rec.StubSize); err != nil {
		return err
	}
	fault.Point("migrate.truncated")
	if err := setMtimeOf(f, timeFromNs(rec.Mtime)); err != nil {
		return err
	}
	fault.Point("migrate.mtime-restored")
	// Recorded before the lease ends with f: a recall's end in another
	// process checks and records under a lease of its own (endRecall).
	rec.Pending = ""
	if err := s.root.state.set(j.abs, j.rel, rec); err != nil {
		return err
	}
	return f.Close()
}

// stubSum hashes the data's first stub_size bytes, read from the target,
// for a file marked for release that has its stub's size now ("" for any
// other): truncated by an earlier release (this step's killed attempt,
// or another worker's), it holds them; rewritten by its user to that
// size since the mark, it does not (a reviewer's finding: the release
// took the user's bytes for a stub, and the next recall wrote the old data
// over them). An empty stub (stub_size 0) says nothing: a file its user
// emptied after the mark becomes the stub of its data before (no byte of
// the user's is lost; docs/remote-copies.md).
func (s *stepRun) stubSum(j *job, target targets.Driver) (string, error) {
	rec := j.next
	if fi, err := os.Lstat(j.abs); err != nil || rec.StubSize <= 0 || fi.Size() != rec.StubSize || rec.StubSize == rec.Size {
		return "", nil
	}
	rc, err := getContent(s.ctx, target, rec.Key, rec.Checksum)
	if err != nil {
		return "", fmt.Errorf("read the first bytes of a file marked for release that has its stub's size: %w", err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, rec.StubSize))
	if err == nil && n != rec.StubSize {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", fmt.Errorf("read the first bytes of a file marked for release that has its stub's size: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// keepWhole leaves a file marked for release whole and premigrated, and
// says why it was not released.
func (s *stepRun) keepWhole(j *job, rec Record, why error) error {
	rec.State, rec.Pending, rec.StubSize = Premigrated, "", 0
	if err := s.root.state.set(j.abs, j.rel, rec); err != nil {
		return err
	}
	return fmt.Errorf("not released: %w; it stays premigrated", why)
}

// touchedStub tells whether the file, whose migrated record no longer
// matches it only by its mtime (a stub that keeps bytes, of the stub's
// size), still holds the data's first bytes: touched, not rewritten. Its
// record must then stay (superseded, its reference would go, and with it
// the data). The bytes are compared with the target's copy; a copy on
// another target than this step's is not reached, and the path fails.
func (s *stepRun) touchedStub(j *job, target targets.Driver, targetName string) (bool, error) {
	p := j.prev
	if p == nil || p.State != Migrated || p.Pending != "" || p.StubSize == 0 || j.fi.Size() != p.StubSize {
		return false, nil
	}
	if p.Target != targetName {
		return false, fmt.Errorf("a stub whose mtime changed since it was migrated to target %s: whether its bytes are still the data's first is read there, and this step writes to %s; recall it first", p.Target, targetName)
	}
	f, _, err := openUserFile(j.abs)
	if err != nil {
		return false, err
	}
	defer f.Close()
	rc, err := getContent(s.ctx, target, p.Key, p.Checksum)
	if err != nil {
		return false, fmt.Errorf("read the first bytes of a stub whose mtime changed: %w", err)
	}
	defer rc.Close()
	return sameFirstBytes(f, rc, p.StubSize)
}

// sameFirstBytes tells whether a and b begin with the same n bytes. An
// error of b's, the target's copy, is returned, an early end included:
// a read that failed says nothing of the bytes (reviewers' findings: a
// stub's record was cleared on a reset connection, and an S3 read cut
// short made a touched stub its own data, the data then collected), and
// a copy of the data shorter than its stub is damaged.
func sameFirstBytes(a, b io.Reader, n int64) (bool, error) {
	x, y := make([]byte, 64<<10), make([]byte, 64<<10)
	for n > 0 {
		k := int(min(n, int64(len(x))))
		if _, err := io.ReadFull(a, x[:k]); err != nil {
			return false, err
		}
		_, err := io.ReadFull(b, y[:k])
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return false, fmt.Errorf("the target's copy of its data ended early (cut short, or damaged): whether its bytes are still the data's first is not known: %w", err)
		case err != nil:
			return false, err
		case !bytes.Equal(x[:k], y[:k]):
			return false, nil
		}
		n -= int64(k)
	}
	return true, nil
}

// transfer is the upload half of Premigrate and Migrate. It leaves in
// j.next the record to write for every job still running.
func (s *stepRun) transfer(target targets.Driver, targetName string, migrate bool) {
	var uploaded atomic.Bool
	s.each(func(j *job) {
		defer s.prog.add(1)
		if !s.open(j) {
			return
		}
		if rec := j.rec; rec != nil {
			switch {
			case rec.State == Migrated && rec.Pending == pendingRelease && migrate:
				j.next, j.note = *rec, "resumed an interrupted release"
				return
			case rec.State == Migrated && rec.Pending == pendingRecall:
				j.finish(CodeSkipped, "%v", errRecallInterrupted) // not "already migrated"
				return
			case rec.State == Migrated:
				j.finish(CodeSkipped, "already migrated")
				return
			case rec.State == Premigrated && rec.Target == targetName && rec.contentAddressed() && !s.opts.Overwrite:
				if !migrate {
					// Its content read again: a save of the same size, its
					// mtime set back, still matches the record, and a send
					// carried the old data for it (a reviewer's finding).
					if _, same, err := s.contentIs(j, rec.Checksum); err != nil && !errors.Is(err, fs.ErrPermission) {
						j.fail(err)
						return
					} else if same || err != nil { // unreadable to this worker (root_squash): by its record, as before
						j.finish(CodeSkipped, "already premigrated")
						return
					}
					break // uploaded again
				}
				if ok, err := s.stillPremigrated(j, target); err != nil {
					j.fail(err)
					return
				} else if ok {
					j.next, j.note = *rec, "already premigrated"
					return
				}
			}
			j.prev = rec // superseded by the upload below
		}
		if touched, err := s.touchedStub(j, target, targetName); err != nil || touched {
			if err != nil {
				j.fail(err)
			} else {
				j.finish(CodeSkipped, "already migrated (a stub whose mtime changed since)")
			}
			return
		}
		sent, err := s.upload(j, target, targetName)
		if err != nil {
			j.fail(err)
			return
		}
		if sent {
			uploaded.Store(true)
			j.note = "uploaded"
		} else {
			j.note = "target already had identical content"
		}
		j.upload = sent
	})
	s.refs.close()
	// A migrate flushes even when it uploaded nothing: the references it
	// wrote, and content put back from the target's trash, must be as
	// durable as uploaded content before any file is released.
	syncer, ok := target.(targets.Syncer)
	if !ok || !(uploaded.Load() || migrate) {
		return
	}
	if err := syncer.Sync(context.WithoutCancel(s.ctx)); err != nil {
		for _, j := range s.jobs {
			if j.res == nil && (j.upload || migrate) {
				s.abandon(j, target, fmt.Errorf("flush target: %w", err))
			}
		}
	}
}

// stillPremigrated checks, before a premigrated file's data is released,
// what its record claims: the local data is the recorded content (an
// mtime can be set by anyone), its reference is on the target and so is
// the content. false means the file must be uploaded again.
func (s *stepRun) stillPremigrated(j *job, target targets.Driver) (bool, error) {
	rec := *j.rec
	ctime, same, err := s.contentIs(j, rec.Checksum)
	if err != nil || !same {
		return false, err // changed: uploaded again, which looks again
	}
	j.ctime = ctime
	// The reference may have been dropped by an interrupted step; it is
	// named by file and content, so writing it again is harmless.
	if ok, err := hasRef(s.ctx, target, rec); err != nil {
		return false, err
	} else if !ok {
		if err := s.root.addRef(s.ctx, target, rec.Checksum, rec.Ref, j.rel, rec.Ino); err != nil {
			return false, err
		}
	}
	return ensureContent(s.ctx, target, rec.Checksum, rec.Size)
}

// openUserFile opens a user's file at name for reading, never through a
// symlink, and returns it with its Fstat. The open does not block: a FIFO
// swapped in for the file since its lstat kept a plain open waiting for a
// writer, past the step's cancellation, for ever (a reviewer's finding).
// Anything but a regular file (a FIFO, a device, a folder) is refused,
// with errNotRegular; only that path fails. A lease another program holds
// on the file (Samba, the NFS server) is waited out as by a plain open
// (see openPastLease).
func openUserFile(name string) (*os.File, fs.FileInfo, error) {
	f, err := fsutil.OpenFile(name, os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f, err = openPastLease(name)
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", errNotRegular, typeName(fi.Mode()))}
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// contentIs tells whether j's file holds the content sum, read whole
// through one descriptor while neither its size, its mtime nor its change
// time moved (see upload); ctime is its change time then, 0 when the file
// changed since the step opened it or while it was read (then same is
// false, and says nothing of its content).
func (s *stepRun) contentIs(j *job, sum string) (ctime int64, same bool, err error) {
	f, before, err := openUserFile(j.abs)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	if !j.unchanged(before) {
		return 0, false, nil
	}
	got, err := s.hash(f)
	if err != nil {
		return 0, false, err
	}
	after, err := f.Stat()
	if err != nil || changed(after, before) || changeTime(after) != changeTime(before) {
		return 0, false, err
	}
	return changeTime(before), got == sum, nil
}

// remoteHas reports whether the target holds the object with the given
// size and checksum. An object whose checksum the target does not report
// (a filesystem target without extended attributes, or an object changed
// since it was written), or whose bytes may not be on disk yet (an object
// written since the target's last complete flush: Object.Unflushed, which
// after a crash may hold other bytes than its checksum says), is read back
// and hashed: its size says nothing of its bytes, and a step that trusted
// it would release a file whose only copy is wrong. One that this host
// can neither flush nor read from the disk (NotDurable: another host's
// unflushed object on NFS) counts as absent, to be written again.
func remoteHas(ctx context.Context, target targets.Driver, key string, size int64, sum string) bool {
	obj, err := target.Stat(ctx, key)
	if err != nil || obj.Size != size || obj.NotDurable {
		return false
	}
	if obj.Checksum != "" && !obj.Unflushed {
		return obj.Checksum == sum
	}
	rc, err := target.Get(ctx, key)
	if err != nil {
		return false
	}
	defer rc.Close()
	got, err := sha256Of(rc)
	return err == nil && got == sum
}

// upload hashes the file, records the file's reference to that content on
// the target, sends the content unless the target already has it, and
// verifies the stored object. It sets j.next; sent reports whether data
// was transferred.
func (s *stepRun) upload(j *job, target targets.Driver, targetName string) (sent bool, err error) {
	f, fi, err := openUserFile(j.abs)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !j.unchanged(fi) {
		return false, errors.New("file changed while opening")
	}
	// The content hashed is the file's while its change time holds too: a
	// save in place of the same size, its mtime set back (touch -r, rsync
	// -t), keeps the others (a reviewer's finding: the release then cut
	// the saved bytes).
	read := changeTime(fi)
	stillRead := func() error {
		after, err := f.Stat()
		if err != nil {
			return err
		}
		if !j.unchanged(after) || changeTime(after) != read {
			return errors.New("file changed during upload")
		}
		j.ctime = read
		return nil
	}
	sum, err := s.hash(f)
	if err == nil {
		err = stillRead()
	}
	if err != nil {
		return false, err
	}
	btime := birthTime(j.abs)
	ref, err := s.root.refID(fi, btime, sum)
	if err != nil {
		return false, err
	}
	j.next = Record{
		State:    Premigrated,
		Size:     fi.Size(),
		Mtime:    fi.ModTime().UnixNano(),
		Target:   targetName,
		Key:      contentKey(sum),
		Checksum: sum,
		Ino:      inode(fi),
		Btime:    btime,
		Ref:      ref,
	}
	// The reference goes first: from then on the collector keeps the
	// content, or puts it back, whatever it saw before.
	if err := s.refs.add(s.ctx, s.root, target, sum, ref, j.abs, j.rel, j.next.Ino); err != nil {
		return false, err
	}
	fault.Point("upload.ref-added")
	j.newRef = j.prev == nil || j.prev.Ref != ref
	defer func() {
		if err != nil && j.newRef {
			_ = s.dropRefUnlessRecorded(j, target, j.next)
		}
	}()
	if !s.opts.Overwrite {
		if ok, err := ensureContent(s.ctx, target, sum, fi.Size()); err != nil || ok {
			return false, err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	body := &targets.ChecksummedReader{ReadSeeker: &countingReader{ctx: s.ctx, r: f, prog: s.prog}, Sum: sum}
	if err := target.Put(s.ctx, j.next.Key, body, fi.Size()); err != nil {
		return false, err
	}
	fault.Point("upload.put")
	if err := s.verify(target, j.next.Key, fi.Size(), sum); err != nil {
		return false, err
	}
	return true, stillRead()
}

// verify checks the stored object against the local checksum, reading it
// back when the target does not report a checksum.
func (s *stepRun) verify(target targets.Driver, key string, size int64, sum string) error {
	obj, err := target.Stat(s.ctx, key)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if obj.Size != size {
		return fmt.Errorf("verify: target holds %d bytes, file has %d", obj.Size, size)
	}
	remote := obj.Checksum
	if remote == "" {
		rc, err := target.Get(s.ctx, key)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		defer rc.Close()
		if remote, err = s.hash(rc); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	if remote != sum {
		return fmt.Errorf("verify: target sha256 %s differs from file sha256 %s", remote, sum)
	}
	return nil
}

func (s *stepRun) hash(r io.Reader) (string, error) {
	return sha256Of(&countingReader{ctx: s.ctx, r: r, prog: s.prog})
}

// sha256Of is the hex SHA-256 of everything r holds.
func sha256Of(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := copyBuffer(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyBufs recycles copy buffers: a fresh 32 KiB buffer per io.Copy is a
// measurable share of the cost of handling many small files.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// copyBuffer is io.Copy with a pooled buffer.
func copyBuffer(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
}

// countingReader stops a copy soon after ctx is cancelled and keeps the
// progress callback (heartbeats) going during long copies.
type countingReader struct {
	ctx  context.Context
	r    io.Reader
	prog *progress
	n    int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if c.n/progressEvery != (c.n+int64(n))/progressEvery {
		c.prog.tick()
	}
	c.n += int64(n)
	return n, err
}

// Seek lets drivers rewind the body for retries.
func (c *countingReader) Seek(off int64, whence int) (int64, error) {
	s, ok := c.r.(io.Seeker)
	if !ok {
		return 0, errors.New("not seekable")
	}
	return s.Seek(off, whence)
}

// ReadAt lets drivers read parts of a large file concurrently.
func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	ra, ok := c.r.(io.ReaderAt)
	if !ok {
		return 0, errors.New("no ReadAt")
	}
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return ra.ReadAt(p, off)
}

func (s *stepRun) failRest(err error) {
	for _, j := range s.jobs {
		if j.res == nil {
			j.fail(err)
		}
	}
}

func (s *stepRun) cancelRest() ([]Result, error) {
	for _, j := range s.jobs {
		if j.res == nil {
			j.finish(CodeFailed, "cancelled: %v", s.ctx.Err())
		}
	}
	return s.results()
}
