package site

import (
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

	"github.com/thehub/hub/activities/targets"
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
	// Prefix is prepended to the root-relative path to form the object
	// key (Premigrate, Migrate): "/projects/a.txt" with prefix "site-a"
	// is stored as "site-a/projects/a.txt".
	Prefix string
	// Overwrite uploads again even when the file is already premigrated
	// or the target already holds identical content (Premigrate, Migrate).
	Overwrite bool
	// StubSize is how many leading bytes a migrated file keeps (Migrate).
	StubSize int64
	// DeleteOnRecall deletes the remote object once the data is back (Recall).
	DeleteOnRecall bool
	// DeleteRemote also deletes remote copies (ReverseStub, Delete).
	DeleteRemote bool
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
	in   string
	rel  string
	abs  string
	fi   fs.FileInfo
	rec  *Record // the file's record, nil when resident
	res  *Result
	next Record // the record to write when the transfer succeeded
	// upload is set when the data was sent to the target in this run.
	upload bool
	// note is the message of a successful result.
	note string
}

func (j *job) finish(code Code, format string, args ...any) {
	j.res = &Result{Path: j.in, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (j *job) fail(err error) { j.finish(CodeFailed, "%v", err) }

// stepRun holds what every phase of a step needs.
type stepRun struct {
	ctx  context.Context
	root *Root
	opts StepOptions
	prog *progress
	jobs []*job
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
		if j.res == nil {
			j.finish(CodeOK, "%s", j.note)
		}
		out[i] = *j.res
	}
	return out, s.ctx.Err()
}

// open resolves the job's path and lstats it; only regular files go on.
func (s *stepRun) open(j *job) bool {
	rel, abs, err := s.root.resolve(j.in)
	if err != nil {
		j.fail(err)
		return false
	}
	j.rel, j.abs = rel, abs
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
	rec, err := s.root.state.get(abs, rel)
	if err != nil {
		j.fail(err)
		return false
	}
	if rec.matches(fi) {
		j.rec = rec
	}
	return true
}

func typeName(m fs.FileMode) string {
	if t := typeOf(m); t != "" {
		return t
	}
	return m.Type().String()
}

// unchanged reports whether the file still is the one the job saw.
func (j *job) unchanged(fi fs.FileInfo) bool {
	return fi.Size() == j.fi.Size() && fi.ModTime().Equal(j.fi.ModTime()) && inode(fi) == inode(j.fi)
}

func objectKey(prefix, rel string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return rel
	}
	return path.Join(prefix, rel)
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
		fi, err := os.Lstat(j.abs)
		if err != nil {
			j.fail(err)
			return
		}
		if !j.unchanged(fi) {
			j.finish(CodeFailed, "file changed during premigration")
			return
		}
		if err := s.root.state.set(j.abs, j.rel, j.next); err != nil {
			j.fail(err)
		}
	})
	return s.results()
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
	s.finishEach(func(j *job) {
		fi, err := os.Lstat(j.abs)
		if err != nil {
			j.fail(err)
			return
		}
		if j.next.Pending == pendingRelease {
			return // resuming: already marked, maybe already truncated
		}
		if !j.unchanged(fi) {
			j.finish(CodeFailed, "file changed during migration")
			return
		}
		j.next.State, j.next.Pending = Migrated, pendingRelease
		j.next.StubSize = min(max(s.opts.StubSize, 0), j.next.Size)
		if err := s.root.state.set(j.abs, j.rel, j.next); err != nil {
			j.fail(err)
		}
	})
	if err := s.root.state.sync(); err != nil {
		s.failRest(err)
	}
	// Phase 2: truncate, restore the mtime, and drop the pending mark.
	s.finishEach(func(j *job) {
		if err := s.release(j); err != nil {
			j.fail(err)
		}
	})
	return s.results()
}

// release truncates the file of a job marked pendingRelease.
func (s *stepRun) release(j *job) error {
	f, err := os.OpenFile(j.abs, os.O_WRONLY|openNoFollow, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	rec := j.next
	// Last check before data is destroyed: the file must still be the
	// one uploaded (or, resuming, be either side of the truncate).
	if !rec.matches(fi) || (fi.Size() == rec.Size && fi.ModTime().UnixNano() != rec.Mtime) {
		// The user wrote to the file: their data wins and it is resident.
		_ = s.root.state.clear(j.abs, j.rel)
		return errors.New("file changed during migration; not released")
	}
	if err := f.Truncate(rec.StubSize); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := setMtime(j.abs, timeFromNs(rec.Mtime)); err != nil {
		return err
	}
	rec.Pending = ""
	return s.root.state.set(j.abs, j.rel, rec)
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
		key := objectKey(s.opts.Prefix, j.rel)
		if rec := j.rec; rec != nil {
			switch {
			case rec.State == Migrated && rec.Pending == pendingRelease && migrate:
				j.next, j.note = *rec, "resumed an interrupted release"
				return
			case rec.State == Migrated:
				j.finish(CodeSkipped, "already migrated")
				return
			case rec.State == Premigrated && rec.Target == targetName && rec.Key == key && !s.opts.Overwrite:
				if !migrate {
					j.finish(CodeSkipped, "already premigrated")
					return
				}
				if remoteHas(s.ctx, target, key, rec.Size, rec.Checksum) {
					j.next, j.note = *rec, "already premigrated"
					return
				}
			}
		}
		sum, sent, err := s.upload(j, target, key)
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
		j.next = Record{
			State:    Premigrated,
			Size:     j.fi.Size(),
			Mtime:    j.fi.ModTime().UnixNano(),
			Target:   targetName,
			Key:      key,
			Checksum: sum,
			Ino:      inode(j.fi),
		}
	})
	syncer, ok := target.(targets.Syncer)
	if !ok || !uploaded.Load() {
		return
	}
	if err := syncer.Sync(context.WithoutCancel(s.ctx)); err != nil {
		for _, j := range s.jobs {
			if j.res == nil && j.upload {
				j.fail(fmt.Errorf("flush target: %w", err))
			}
		}
	}
}

// remoteHas reports whether the target holds the object with the given
// size and, when the target knows it, checksum.
func remoteHas(ctx context.Context, target targets.Driver, key string, size int64, sum string) bool {
	obj, err := target.Stat(ctx, key)
	return err == nil && obj.Size == size && (obj.Checksum == "" || obj.Checksum == sum)
}

// upload hashes the file, sends it unless the target already has the
// same content, and verifies the stored object. sent reports whether data
// was transferred.
func (s *stepRun) upload(j *job, target targets.Driver, key string) (sum string, sent bool, err error) {
	f, err := os.OpenFile(j.abs, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !j.unchanged(fi) {
		return "", false, errors.New("file changed while opening")
	}
	sum, err = s.hash(f)
	if err != nil {
		return "", false, err
	}
	if !s.opts.Overwrite {
		if obj, err := target.Stat(s.ctx, key); err == nil && obj.Size == fi.Size() && obj.Checksum == sum {
			return sum, false, nil
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", false, err
	}
	body := &targets.ChecksummedReader{ReadSeeker: &countingReader{ctx: s.ctx, r: f, prog: s.prog}, Sum: sum}
	if err := target.Put(s.ctx, key, body, fi.Size()); err != nil {
		return "", false, err
	}
	if err := s.verify(target, key, fi.Size(), sum); err != nil {
		return "", false, err
	}
	after, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !j.unchanged(after) {
		return "", false, errors.New("file changed during upload")
	}
	return sum, true, nil
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
	h := sha256.New()
	if _, err := copyBuffer(h, &countingReader{ctx: s.ctx, r: r, prog: s.prog}); err != nil {
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
