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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/fault"
)

// Recall brings migrated files back: the data is fetched from the target
// recorded with each file into a temporary file next to it and checked
// against the recorded checksum, and only then written over the stub; the
// original mtime is restored. A recalled file stays premigrated (its data
// is local and its remote copy still referenced), so migrating it again
// moves no data; with DeleteOnRecall it becomes resident and its reference
// is dropped, so the collector frees the remote copy unless another record
// refers to it. Premigrated files already have their data; they are
// skipped unless DeleteOnRecall asks for them to become resident.
//
// A failed recall leaves the file as it was: stub and record intact, and
// retryable.
func Recall(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions) ([]Result, error) {
	return recall(ctx, root, paths, targetsFn, opts, opts.DeleteOnRecall)
}

// ReverseStub makes premigrated and migrated files resident again and
// drops their reference to the remote copy: migrated data is recalled
// first. (DeleteRemote changes nothing more: remote copies are freed by
// the collector once no record refers to them.)
func ReverseStub(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions) ([]Result, error) {
	return recall(ctx, root, paths, targetsFn, opts, true)
}

// recall implements Recall and ReverseStub; resident makes the files
// resident, dropping their references.
func recall(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions, resident bool) ([]Result, error) {
	s := newRun(ctx, root, paths, opts)
	drivers := &driverCache{fn: targetsFn}
	// toFlush: the files whose record or reference goes below, so their
	// data must be on disk first, whoever wrote it: this attempt, an
	// earlier one killed or abandoned before its flush (whose data the
	// page cache may still hold alone), or the file's user.
	var toFlush written
	s.each(func(j *job) {
		defer s.prog.add(1)
		if !s.open(j) {
			return
		}
		rec := j.rec
		switch {
		case rec == nil:
			j.finish(CodeSkipped, "resident")
			return
		case rec.State == Premigrated:
			if !resident {
				j.finish(CodeSkipped, "data already local (premigrated)")
				return
			}
			j.next, j.note = *rec, "data was local"
			toFlush.add(s.root, j.rel, j.fi)
			return
		}
		j.next = *rec
		// A crash may have left the whole file in place (before the
		// release truncated it, or after a recall wrote it back): what
		// is on disk, not pages whose writeback failed (see hashOnDisk).
		if rec.Pending != "" && j.fi.Size() == rec.Size {
			if sum, err := s.hashOnDisk(j.abs); err == nil && sum == rec.Checksum {
				j.ctime = changeTime(j.fi) // as opened, before the hash: a save since leaves it resident (see restoreMtime)
				j.note = "data was local"
				toFlush.add(s.root, j.rel, j.fi)
				return
			}
		}
		driver, err := drivers.get(rec.Target)
		if err != nil {
			j.fail(err)
			return
		}
		if err := s.recallOne(j, driver, *rec); err != nil {
			j.fail(err)
			return
		}
		j.next.Pending = pendingRecall // its record now (see recallOne)
		toFlush.add(s.root, j.rel, j.fi)
		j.note, j.wroteBack = "recalled", true
	})
	// Cancelled, the batch still finishes the files whose data it wrote
	// (the others were cancelled): a file left whole under a "recall in
	// progress" mark would count as this recall's whatever its user writes.
	// One flush for the batch before any record or reference goes.
	if err := toFlush.flush(s.root); err != nil {
		for _, j := range s.jobs {
			if j.res == nil && j.wroteBack {
				s.cutBack(j)
			}
		}
		s.failRest(fmt.Errorf("flush recalled data: %w", err))
	}
	s.finishEach(func(j *job) {
		rec := j.next
		drop, err := s.endRecall(j, rec, resident)
		if err != nil {
			j.fail(err)
			return
		}
		if !drop {
			return
		}
		driver, err := drivers.get(rec.Target)
		if err == nil {
			err = s.dropRefUnlessRecorded(j, driver, rec)
		}
		if err != nil {
			j.note += fmt.Sprintf("; the remote copy stays referenced (%v)", err)
		}
	})
	return s.results()
}

// endRecall gives a recalled file its mtime back and its record its end
// (premigrated, or none when resident), under the file's lock and only
// while the file at its path is still the one recalled with the record
// the recall read or marked: a user may have moved another file (another
// stub) to the path meanwhile, and another step (a migrate's release) may
// have recorded the file. drop: the file's reference is to be dropped.
//
// The lock (lockFile) holds across the site's worker processes too, and
// the file is held open and leased, where the kernel grants it, from the
// check to the record written: a migrate's release, which checks and
// records under both, cannot record the file in between and have its
// stub's record overwritten by this end (the stub then read as a
// resident file of its size 0, and the next migrate let its content go).
// Another's lease that outlasts openPastLeases fails the end (a release
// under way); any other refusal to open a file whose mtime needs no
// setting (a running program, a read-only filesystem) leaves it checked
// and recorded by path, as before leases were taken here.
func (s *stepRun) endRecall(j *job, rec Record, resident bool) (drop bool, err error) {
	// Only its change time moved since the recall wrote it (a chmod, a tag
	// in its attributes): its content read again before the lock, so that
	// it stays the data, premigrated with its mtime, where it is (a
	// reviewer's finding: it was left resident, its reference dropped).
	if fi, err := os.Lstat(j.abs); err == nil && rec.State == Migrated && j.ctime != 0 && !changed(fi, j.fi) && changeTime(fi) != j.ctime {
		if ctime, same, err := s.contentIs(j, rec.Checksum); err == nil && same {
			j.ctime = ctime
		}
	}
	unlock, err := s.root.lockFile(j.fi)
	if err != nil {
		return false, err
	}
	defer unlock()
	f, err := openLeased(j.abs)
	switch {
	case err == nil:
		defer f.Close()
	case rec.State == Migrated || errors.Is(err, syscall.EWOULDBLOCK):
		return false, err
	}
	fi, err := os.Lstat(j.abs)
	if err != nil {
		return false, err
	}
	if err := s.recordStill(j, fi, rec); err != nil {
		return false, err
	}
	if recallEndChecked != nil {
		recallEndChecked(j.abs)
	}
	kept := false
	if rec.State == Migrated {
		if kept, err = restoreMtime(j, f, timeFromNs(rec.Mtime)); err != nil {
			return false, err
		}
		if kept {
			// Not the data any more, maybe: recorded premigrated, its
			// user's save would be taken for the remote copy (a
			// reviewer's finding: a send then carried the old data).
			j.note += "; written since by its user, whose mtime it keeps, and resident"
		}
		fault.Point("recall.mtime-restored")
	}
	if !resident && !kept && rec.contentAddressed() {
		rec.State, rec.Pending, rec.StubSize = Premigrated, "", 0
		return false, s.root.state.set(j.abs, j.rel, rec)
	}
	// The record goes before its reference: a crash in between leaves
	// a reference, which only keeps the remote copy a while longer.
	if err := s.root.state.clear(j.abs, j.rel); err != nil {
		return false, err
	}
	fault.Point("recall.record-cleared")
	return rec.contentAddressed(), nil // legacy copies may be shared by path: never freed
}

// recallOne brings one stub's data back. The data goes to a scratch file
// first (unnamed, on the stub's filesystem: see fsutil.OpenScratch) and
// is checked there, so a missing or wrong remote copy leaves the stub
// untouched; then it is written over the stub in place,
// keeping the file's inode, owner, permissions and attributes. The stub's
// bytes are the data's first bytes, so the file is a valid prefix of its
// data at every moment, which a retried recall recognises.
func (s *stepRun) recallOne(j *job, driver targets.Driver, rec Record) error {
	if rec.contentAddressed() {
		ok, err := hasRef(s.ctx, driver, rec)
		if err != nil {
			return err
		}
		if !ok {
			guarded, err := guardedRef(s.ctx, driver, rec)
			if err != nil {
				return err
			}
			if !guarded {
				return fmt.Errorf("%w: its reference on the target is gone (a record replayed after it was superseded?); nothing was moved", ErrUntrustedRecord)
			}
			// An audit stopped while it dropped it, since the record named
			// it: it goes back, as the next audit would put it.
			if err := s.root.addRef(s.ctx, driver, rec.Checksum, rec.Ref, j.rel, rec.Ino); err != nil {
				return err
			}
		}
	}
	rc, err := getContent(s.ctx, driver, rec.Key, rec.Checksum)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, release, err := fsutil.OpenScratch(s.ctx, j.abs)
	if err != nil {
		return err
	}
	defer release()
	// The scratch file is written sparse (see sparseWriter), so a sparse
	// file's holes take no room there either; it must be empty for that
	// (OpenScratch's is: unnamed and new, or a temporary file truncated).
	if fi, err := tmp.Stat(); err != nil || fi.Size() != 0 {
		return fmt.Errorf("the recall's scratch file is not empty (%v); the stub is unchanged", err)
	}
	h := sha256.New()
	sw := &sparseWriter{f: tmp}
	n, err := copyBuffer(sw, io.TeeReader(&countingReader{ctx: s.ctx, r: rc, prog: s.prog}, h))
	if err == nil {
		err = sw.finish()
	}
	if err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != rec.Size || sum != rec.Checksum {
		return fmt.Errorf("recalled data (%d bytes, sha256 %s) does not match the original (%d bytes, sha256 %s); the stub is unchanged", n, sum, rec.Size, rec.Checksum)
	}
	// The hash of the stub's bytes, which a cut back after a failed flush
	// checks on disk before it records a stub (see cutBack).
	sh := sha256.New()
	if _, err := io.Copy(sh, io.NewSectionReader(tmp, 0, rec.StubSize)); err != nil {
		return err
	}
	j.stubSum = hex.EncodeToString(sh.Sum(nil))
	fault.Point("recall.fetched")
	// NoAtime: the stub is read (isPrefixOf below), which is not its
	// users' access.
	f, err := fsutil.OpenFile(j.abs, os.O_RDWR|openNoFollow|fsutil.NoAtime, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// Leased (see exclusiveLease), the file has no other descriptor while
	// its data is written back, and one opened meanwhile waits until this
	// recall closes it: a program writing to it during the copy would mix
	// its bytes with the data's, which the recall would then record as the
	// original. Past the kernel's lease-break time such an open goes
	// through: the copy stops before (copyWhileLeased).
	if err := exclusiveLease(f); err != nil {
		return fmt.Errorf("not recalled: %w, whose writes would mix with the data written back", err)
	}
	leased := leaseHeld(f)
	// The file must still be the stub seen, before the mark is written
	// and after: the mark makes any size up to the data's count as this
	// recall's, so a user's write must not carry it (the original record
	// is put back, which the written file no longer matches).
	written := func() bool { fi, err := f.Stat(); return err != nil || !j.unchanged(fi) }
	if written() {
		return errChangedDuringRecall
	}
	// A stub is the data's first bytes, and so is what an interrupted
	// recall wrote. Anything else was written by its user, even at the
	// size a record accepts: a stub's, which an interrupted release
	// matches by size alone (the mtime moved with the truncate), also when
	// the stub was the whole file.
	if ok, err := isPrefixOf(f, tmp); err != nil {
		return err
	} else if !ok {
		return errors.New("the file is not the data's first bytes, as a stub or an interrupted recall leaves it (written since by its user, or damaged): left as it is, with its record")
	}
	if rec.Pending != pendingRecall {
		marked := rec
		marked.Pending = pendingRecall
		if err := s.root.state.set(j.abs, j.rel, marked); err != nil {
			return err
		}
		fault.Point("recall.marked")
		if written() {
			_ = s.root.state.set(j.abs, j.rel, rec)
			return errChangedDuringRecall
		}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if recallWriting != nil {
		recallWriting(j.abs)
	}
	if err := copyWhileLeased(f, tmp, leased); err != nil {
		// Cut back to the stub, which is the data's first bytes, only
		// while nothing else can have written; else what was written, the
		// data's first bytes too, stays marked for a recall to finish.
		if !leased || leaseHeld(f) {
			_ = f.Truncate(rec.StubSize)
			_ = setMtime(j.abs, timeFromNs(rec.Mtime))
		}
		return err
	}
	if recallWritten != nil {
		recallWritten(j.abs)
	}
	fault.Point("recall.written")
	// What the recall left, which restoreMtime and cutBack compare with:
	// its change time too (a save of the same size, its mtime kept, has
	// the others; see job.ctime).
	if j.fi, err = f.Stat(); err != nil {
		return err
	}
	j.ctime = changeTime(j.fi)
	return f.Close()
}

// copyWhileLeased copies the data from tmp to f a chunk at a time, from
// f's offset. Where f is leased, another program's open breaks the lease:
// that program waits the kernel's lease-break time, and then goes through
// and may write. The copy goes on for half that time after it sees the
// break begin, and stops there: going on, it would write over that
// program's bytes, which no read-back could tell from the data (a
// reviewer's finding). What was written is the data's first bytes, left
// marked for a recall to finish.
//
// Under the lease a chunk of zeros is not written: a recall wrote every
// byte, and a sparse file (a disk image, `truncate -s 1T`) came back
// allocated whole, which could fill the volume (a reviewer's finding).
// Nobody else writes f then, and its bytes are the data's first bytes
// (isPrefixOf, under the lease): within them such a chunk is there
// already; past f's end it reads as zeros once a later chunk is written
// past it (a hole), or once f is extended to the data's size at the end.
// So f is the data's first bytes at every moment, as before, and a hole
// only where the data is zeros. Without a lease (NFS, leases off) every
// chunk is written, as before: a user's write there would stay under the
// data's record.
func copyWhileLeased(f *os.File, tmp io.Reader, leased bool) error {
	buf := make([]byte, 128<<10)
	var breaking time.Time
	skipped := false // the last chunk, not written
	for {
		if leased && !leaseHeld(f) {
			if breaking.IsZero() {
				breaking = time.Now()
			}
			if time.Since(breaking) > leaseBreakTime()/2 {
				return errors.New("not recalled yet: another program opened the file while its data was written back; left marked, for a recall to finish")
			}
		}
		n, err := io.ReadFull(tmp, buf)
		if n > 0 {
			var werr error
			if skipped = leased && allZero(buf[:n]); skipped {
				_, werr = f.Seek(int64(n), io.SeekCurrent)
			} else {
				_, werr = f.Write(buf[:n])
			}
			if werr != nil {
				return werr
			}
			if recallChunk != nil {
				recallChunk()
			}
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			if skipped {
				return extendTo(f)
			}
			return nil
		case err != nil:
			return err
		}
	}
}

// extendTo extends f with zeros (a hole) to its offset, the data's end,
// where the data's last chunks were zeros and not written. It never
// shortens f. What was written is flushed first: the journal records the
// new size at once, and after a power cut the writes still in memory
// would read as zeros below it, a file neither the data's first bytes nor
// its user's (a reviewer's finding, on ext4 shut down by its ioctl).
func extendTo(f *os.File) error {
	end, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() >= end {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Truncate(end)
}

// zeros is compared with by allZero.
var zeros = make([]byte, 64<<10)

// allZero tells whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// sparseWriter writes to the empty file f from its start, leaving a hole
// where a write is all zeros; finish then gives f the size of all that
// was written, so that it reads back exactly so.
type sparseWriter struct {
	f   *os.File
	off int64
}

func (w *sparseWriter) Write(p []byte) (int, error) {
	if allZero(p) {
		w.off += int64(len(p))
		return len(p), nil
	}
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

func (w *sparseWriter) finish() error { return w.f.Truncate(w.off) }

// recallChunk, nil outside tests, is called after each chunk a recall
// writes back.
var recallChunk func()

// leaseBreakTime is how long the kernel makes an open wait for a lease's
// holder (/proc/sys/fs/lease-break-time, 45 s unless set otherwise).
func leaseBreakTime() time.Duration {
	b, err := os.ReadFile("/proc/sys/fs/lease-break-time")
	if s, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 45 * time.Second
}

// cutBack puts a file whose data this recall wrote, and whose flush
// failed, back to its stub (the data's first bytes, as a failed copy
// does), unless its user wrote it since (leased, as in restoreMtime). The
// disk may hold other bytes than the data where the writes failed, and a
// retry does not write over a file that is not the data's first bytes (a
// user's, as far as it can tell). Under the file's lock, and only while
// its record is still this recall's mark: another worker's retry may
// have found the data whole and ended the recall meanwhile (a reviewer's
// finding: the file it had just recorded resident or premigrated was cut
// to its stub, and its data lost). Cut back, it is recorded a stub again,
// where the disk holds the stub's bytes.
func (s *stepRun) cutBack(j *job) {
	unlock, err := s.root.lockFile(j.fi)
	if err != nil {
		return
	}
	defer unlock()
	f, err := openPastLeases(j.abs, os.O_RDWR|fsutil.NoAtime)
	if err != nil {
		return
	}
	defer f.Close()
	if exclusiveLease(f) != nil || !leaseHeld(f) {
		// Open elsewhere, or no lease here (NFS, leases off): nothing
		// keeps a write out of the cut (a reviewer's finding: one through
		// a descriptor the user's editor had opened was cut). The mark
		// stays, for the next recall to look at.
		return
	}
	fi, err := f.Stat()
	if err != nil || !j.unchanged(fi) || changeTime(fi) != j.ctime || s.recordStill(j, fi, j.next) != nil {
		return // its user's since (a reviewer's finding: a save of the same size was cut)
	}
	if now, err := f.Stat(); err != nil || changed(now, fi) || changeTime(now) != changeTime(fi) || !leaseHeld(f) {
		return
	}
	if cutBackChecked != nil {
		cutBackChecked(j.abs)
	}
	if f.Truncate(j.next.StubSize) != nil || setMtimeOf(f, timeFromNs(j.next.Mtime)) != nil {
		return
	}
	// A stub again, and recorded so, where the disk holds the stub's
	// bytes (the flush failed: it may not): another worker's end of a
	// recall that found the data whole before the cut (waiting for the
	// lock) then finds the record changed, instead of taking the stub for
	// its user's write and recording it resident. Otherwise the mark
	// stays, for a recall to look at.
	dropCache(f)
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, j.next.StubSize)); err != nil || hex.EncodeToString(h.Sum(nil)) != j.stubSum {
		return
	}
	rec := j.next
	rec.Pending = ""
	_ = s.root.state.set(j.abs, j.rel, rec)
}

// cutBackChecked, nil outside tests, is called when cutBack has checked
// the file, right before it truncates it (a write there, through a
// descriptor opened before the lease, is what the lease keeps out).
var cutBackChecked func(abs string)

// restoreMtime gives a recalled file f (see openLeased) its original
// mtime back, unless its user wrote it since the recall did: a save keeps
// its own mtime (set back, it would look older than it is to a sync
// choosing the newest version).
func restoreMtime(j *job, f *os.File, mtime time.Time) (kept bool, err error) {
	if fi, err := f.Stat(); err != nil || !j.unchanged(fi) || (j.ctime != 0 && changeTime(fi) != j.ctime) {
		return true, err
	}
	return false, setMtimeOf(f, mtime)
}

// openLeased opens the file at name and leases it (see exclusiveLease:
// where the kernel grants one, nobody opens or writes it until f is
// closed; a program having it open leaves it unleased). A file that
// cannot be opened for writing (read-only, a running program, on a
// read-only filesystem) is opened for reading, without a lease.
func openLeased(name string) (*os.File, error) {
	f, err := openPastLeases(name, os.O_WRONLY)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ETXTBSY) || errors.Is(err, syscall.EROFS) {
		return openPastLeases(name, os.O_RDONLY)
	}
	if err != nil {
		return nil, err
	}
	_ = exclusiveLease(f)
	return f, nil
}

// openPastLeases opens name without blocking on another's lease, and
// waits out a lease that lasts an instant (about half a second in all):
// the recall's own, which a process forked meanwhile holds until its exec
// closes the descriptor it inherited (60 ms were too short on a loaded
// machine: a fault test failed so).
func openPastLeases(name string, flag int) (*os.File, error) {
	for wait := time.Millisecond; ; wait *= 2 {
		f, err := fsutil.OpenFile(name, flag|openNoFollow|syscall.O_NONBLOCK, 0)
		if !errors.Is(err, syscall.EWOULDBLOCK) || wait > 256*time.Millisecond {
			return f, err
		}
		time.Sleep(wait)
	}
}

// moveAside moves the entry at l into the site trash as name, with its
// index records (see copyRecords), and returns its new root-relative path.
// An entry on another filesystem than the trash (a mount below the root)
// is moved beside itself instead, under a temporary name (tmpPrefix).
func (r *Root) moveAside(ctx context.Context, l *loc, name string) (string, error) {
	if err := mkdirBeneath(r.f, trashFolder, 0o750); err != nil {
		return "", err
	}
	trash, err := openBeneath(r.f, trashFolder, oDirPath, 0)
	if err != nil {
		return "", err
	}
	defer trash.Close()
	to := &loc{rel: path.Join(trashFolder, name), parent: trash, name: name}
	err = r.moveWithRecords(ctx, l.rel, to.rel, []*loc{l}, func() error { return renameBeneath(l, to, false) })
	if errors.Is(err, unix.EXDEV) {
		beside := tmpPrefix + name
		to = &loc{rel: path.Join(path.Dir(l.rel), beside), parent: l.parent, name: beside}
		err = r.moveWithRecords(ctx, l.rel, to.rel, []*loc{l}, func() error { return renameBeneath(l, to, false) })
	}
	if err != nil {
		return "", err
	}
	return to.rel, nil
}

// recallWriting and recallWritten, nil outside tests, are called right
// before and after a recall writes a stub's data back, with the stub's
// path: tests act there as a program writing to the file, or another
// flushing the filesystem.
var recallWriting, recallWritten func(abs string)

// recallEndChecked, nil outside tests, is called once a recall's end has
// checked the file and its record, before it writes: tests let another
// worker come there.
var recallEndChecked func(abs string)

// errChangedDuringRecall: the stub was written to while its data was
// fetched; the user's write wins and the file is left as it is.
var errChangedDuringRecall = errors.New("file changed during recall")

// isPrefixOf tells whether f's content is the first bytes of data's.
func isPrefixOf(f, data io.ReadSeeker) (bool, error) {
	for _, r := range []io.Seeker{f, data} {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
	}
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		n, err := io.ReadFull(f, a)
		if n > 0 {
			if m, _ := io.ReadFull(data, b[:n]); m != n || !bytes.Equal(a[:n], b[:n]) {
				return false, nil
			}
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return true, nil
		case err != nil:
			return false, err
		}
	}
}

// hashOnDisk hashes the file as the disk holds it: its cached pages that
// are not waiting to be written are dropped first (dropCache). Where a
// filesystem keeps a page whose writeback failed cached, clean and whole
// while the disk holds other bytes (ext4 here drops it itself), the flush
// after the one that failed succeeds: trusted, that page would let a
// retried recall drop the record and the reference of a file the disk
// does not hold.
func (s *stepRun) hashOnDisk(name string) (string, error) {
	f, _, err := openUserFile(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	dropCache(f)
	return s.hash(f)
}

// driverCache asks TargetFunc once per target name and batch.
type driverCache struct {
	fn TargetFunc
	mu sync.Mutex
	m  map[string]targets.Driver
}

func (c *driverCache) get(name string) (targets.Driver, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.m[name]; ok {
		return d, nil
	}
	if c.fn == nil {
		return nil, fmt.Errorf("target %q: no targets configured", name)
	}
	d, err := c.fn(name)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", name, err)
	}
	if c.m == nil {
		c.m = map[string]targets.Driver{}
	}
	c.m[name] = d
	return d, nil
}

// Delete removes files, symlinks and directory trees. With DeleteRemote
// the references of the premigrated and migrated files removed are
// dropped afterwards, so the collector frees their remote copies unless
// another record refers to them. Absent paths are skipped.
func Delete(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions) ([]Result, error) {
	globs, err := newFilter(WalkOptions{Include: opts.Include, Exclude: opts.Exclude})
	if err != nil {
		return nil, err
	}
	if len(globs.exclude) == 0 {
		globs = nil // none in force: nothing is kept out
	}
	s := newRun(ctx, root, paths, opts)
	drivers := &driverCache{fn: targetsFn}
	s.each(func(j *job) {
		defer s.prog.add(1)
		l, err := s.root.locate(j.in)
		if err != nil {
			if isNotExist(err) {
				j.finish(CodeSkipped, "not found")
			} else {
				j.fail(err)
			}
			return
		}
		j.loc = l
		rel, abs := l.rel, l.path()
		if rel == "" {
			j.finish(CodeFailed, "refusing to delete the site root")
			return
		}
		fi, err := os.Lstat(abs)
		if err != nil {
			if isNotExist(err) {
				_ = s.root.state.forgetTree(rel)
				j.finish(CodeSkipped, "not found")
				return
			}
			j.fail(err)
			return
		}
		if globs != nil && globs.excluded(rel) {
			// Given as it is (a discovery of exact paths), not walked: the
			// excludes are what no job touches; the includes select what a
			// walk finds, and a path given is the user's choice.
			j.finish(CodeFailed, "not deleted: the job's exclude globs keep it out of the job")
			return
		}
		if fi.IsDir() {
			if err := mountedBeneath(abs); err != nil {
				j.fail(err)
				return
			}
			// Checked here first, so that a folder that stays is not
			// moved aside (the deletes of the files the job selected in
			// it, running meanwhile, would find them gone), and again
			// before it is removed.
			if globs != nil && s.keepsOut(j, globs, abs, rel) {
				return
			}
		}
		// Where records are kept by path (the state index), a stub with
		// other names has its data led to by this path's record only.
		if !s.root.state.xattr {
			_, linked, err := s.records(rel, abs, fi)
			if err != nil {
				j.fail(err)
				return
			}
			if n := countState(linked, Migrated); n > 0 {
				j.finish(CodeFailed, "not deleted: %d stubs here have other names (hard links), which this site's state index does not know, so deleting would leave their data reachable from none; recall them first", n)
				return
			}
		}
		// The records are read for the references to drop, once the tree
		// is moved where no user reaches it, with its records: a stub its
		// user moves out (or links elsewhere) while the delete runs is then
		// not among what is removed, and keeps its reference. A crash after
		// the move leaves the entry in the site trash, its references kept
		// (hub site purge-trash removes it).
		var recs, linked []Record
		if s.opts.DeleteRemote {
			// Named by the file's identity and path (two names of one
			// file are two entries), no other live file's: a rerun after
			// a kill in the move (its records copied first) takes the same
			// name, and so finishes the same copy.
			sum := sha256.Sum256([]byte(rel))
			name := fmt.Sprintf("delete-%d-%d-%x", inode(fi), birthTime(abs), sum[:6])
			if rel, err = s.root.moveAside(s.ctx, l, name); err != nil {
				j.fail(err)
				return
			}
			fault.Point("delete.moved-aside")
			abs = filepath.Join(s.root.dir, filepath.FromSlash(rel))
			if fi.IsDir() && globs != nil {
				// Checked again where no user adds a file meanwhile; a
				// folder that holds one now goes back.
				n, first, err := keptOut(s.ctx, globs, abs, l.rel)
				if err != nil || n > 0 {
					where, perr := s.root.putBackAside(s.ctx, rel, l)
					switch {
					case perr != nil:
						j.fail(fmt.Errorf("not deleted, and not put back: %w (it is kept in the site trash as %s)", errors.Join(err, perr), path.Base(rel)))
					case err != nil:
						j.fail(err)
					default:
						j.finish(CodeFailed, "%s", keptOutMessage(n, first, l.rel, where))
					}
					return
				}
			}
			if recs, linked, err = s.root.trashedRecords(rel, rel); err != nil {
				j.fail(err)
				return
			}
		} else if fi.IsDir() && globs != nil && s.keepsOut(j, globs, abs, rel) {
			// Checked again right before the removal (nothing moved
			// aside: a file a user adds in this instant is removed).
			return
		}
		if err := removeTree(abs); err != nil {
			j.fail(err)
			return
		}
		if err := s.root.state.forgetTree(rel); err != nil {
			j.fail(err)
			return
		}
		fault.Point("delete.removed")
		// References go after the files: a crash in between keeps remote
		// copies a while longer, never loses one that a stub still needs.
		remote := 0
		for _, rec := range recs {
			driver, err := drivers.get(rec.Target)
			if err == nil {
				err = dropRef(s.ctx, driver, rec)
			}
			if err != nil {
				j.fail(err)
				return
			}
			remote++
		}
		j.note = "removed"
		if s.opts.DeleteRemote {
			j.note = fmt.Sprintf("removed; %d remote copies released", remote)
		}
		if s.opts.DeleteRemote && len(linked) > 0 {
			j.note += fmt.Sprintf("; %d kept for files that still have other names (hard links)", len(linked))
		}
	})
	return s.results()
}

// keptOut counts the paths in the folder at abs (the folder of
// root-relative path rel, or where a delete moved it aside) that the
// job's exclude globs keep out of the job (filter.excluded), each matched
// by its root-relative path at rel, without a leading "/", as readDir
// forms it. An excluded folder counts once, for all it holds. first is
// the first of them, as an API path. What only misses an include comes
// with the folder the includes chose (a reviewer's finding: a delete of
// the folders `**/cache` selects refused every one of them).
func keptOut(ctx context.Context, f *filter, abs, rel string) (n int, first string, err error) {
	err = filepath.WalkDir(abs, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if absent(err) {
				return nil
			}
			return err
		}
		if p == abs {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		sub, err := filepath.Rel(abs, p)
		if err != nil {
			return err
		}
		r := path.Join(rel, filepath.ToSlash(sub))
		if !f.excluded(r) {
			return nil
		}
		if n++; first == "" {
			first = apiPath(r)
		}
		if e.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	return n, first, err
}

// keepsOut tells whether the folder at abs (of root-relative path rel)
// holds a path the globs keep out of the job, and then finishes j saying
// so (or fails it when the folder cannot be read).
func (s *stepRun) keepsOut(j *job, globs *filter, abs, rel string) bool {
	n, first, err := keptOut(s.ctx, globs, abs, rel)
	switch {
	case err != nil:
		j.fail(err)
	case n > 0:
		j.finish(CodeFailed, "%s", keptOutMessage(n, first, rel, rel))
	}
	return err != nil || n > 0
}

// keptOutMessage is the message of a folder rel that a delete left, with
// n paths the globs keep out (first among them), at where (rel, or the
// name it was put back under).
func keptOutMessage(n int, first, rel, where string) string {
	paths := "paths"
	if n == 1 {
		paths = "path"
	}
	msg := fmt.Sprintf("not deleted: it holds %d %s the job's exclude globs keep out of the job, e.g. %s; its other files are deleted by their own entries (a recursive discovery lists them)",
		n, paths, first)
	if where != rel {
		msg += fmt.Sprintf("; a folder took its name while it was set aside, so it is kept as %s", apiPath(where))
	}
	return msg
}

// putBackAside returns the entry a delete moved aside to asideRel
// (moveAside) to l, with its records, and returns its root-relative path:
// l's, or a name of its own beside it (keptName) when an entry took l's
// name meanwhile (checked before the records are copied, which would
// replace that entry's).
func (r *Root) putBackAside(ctx context.Context, asideRel string, l *loc) (string, error) {
	aside := sibling(l, path.Base(asideRel)) // beside l (moveAside, another filesystem)
	if path.Dir(asideRel) != path.Dir(l.rel) {
		parent, err := openBeneath(r.f, path.Dir(asideRel), oDirPath, 0)
		if err != nil {
			return "", err
		}
		defer parent.Close()
		aside = &loc{rel: asideRel, parent: parent, name: path.Base(asideRel)}
	}
	to := l
	if _, err := os.Lstat(to.path()); !isNotExist(err) {
		if err != nil {
			return "", err
		}
		to = sibling(l, keptName(l.name, time.Now().UnixNano()))
		if _, err := os.Lstat(to.path()); !isNotExist(err) {
			return "", fmt.Errorf("%s: cannot be put back, its name is taken", apiPath(l.rel))
		}
	}
	err := r.moveWithRecords(ctx, asideRel, to.rel, []*loc{to}, func() error {
		fault.Point("delete.putting-back")
		return renameBeneath(aside, to, false)
	})
	if err != nil {
		return "", err
	}
	return to.rel, nil
}

// records returns the trusted, content-addressed records at or below a
// path, whose references a delete drops. A record the site did not write
// is passed over: its reference, if any, is another file's. The records
// of files with other names (hard links), which outlive the delete and
// may be stubs that need the copy, are returned apart, in linked.
func (s *stepRun) records(rel, abs string, fi fs.FileInfo) (recs, linked []Record, err error) {
	keep := func(rec *Record, ino, names uint64, btime func() int64) {
		if rec == nil || !rec.contentAddressed() {
			return
		}
		if stale, err := s.root.state.trust(rec, ino, btime); err != nil || stale {
			return
		}
		if names > 1 {
			linked = append(linked, *rec)
			return
		}
		recs = append(recs, *rec)
	}
	switch {
	case fi.IsDir():
		files, _ := newFilter(WalkOptions{Types: []string{TypeFile}})
		err := walkTree(s.ctx, s.root, []string{rel}, walkConfig{filter: files, missingOK: true, btime: true}, func(items []item) error {
			for _, it := range items {
				keep(it.rec, it.ino, it.links, func() int64 { return it.btime })
			}
			return nil
		})
		return recs, linked, err
	case fi.Mode().IsRegular():
		rec, err := s.root.state.get(abs, rel)
		if err != nil && !errors.Is(err, ErrUntrustedRecord) {
			return nil, nil, err
		}
		keep(rec, inode(fi), links(fi), func() int64 { return birthTime(abs) })
	}
	return recs, linked, nil
}

// countState is the number of records in state.
func countState(recs []Record, state State) int {
	n := 0
	for _, rec := range recs {
		if rec.State == state {
			n++
		}
	}
	return n
}

// CopyIn writes size bytes from r to the root-relative path p (size < 0:
// until EOF), creating parent directories, and sets its mtime unless
// mtime is zero. The data goes to a temporary file renamed over p, so p
// is never seen half-written and an existing file (or stub) at p is
// replaced as a whole, becoming resident. It does not fsync.
func CopyIn(ctx context.Context, root *Root, p string, r io.Reader, size int64, mtime time.Time) error {
	l, err := root.locateCreating(p)
	if err != nil {
		return err
	}
	defer l.close()
	return copyIn(ctx, root, l, r, size, mtime, nil, nil, nil)
}

// copyIn is CopyIn into the path l pins (so that the caller's checks and
// the replacement see the same folder, wherever its path leads meanwhile),
// with a progress callback (heartbeats during long copies), a check run
// after the data is written but before it replaces the file (a failed
// check leaves it exactly as it was), and put, which puts the written
// temporary file at l's name (nil: renamed over it; see fsutil.CommitBy).
func copyIn(ctx context.Context, root *Root, l *loc, r io.Reader, size int64, mtime time.Time, beat func(int), check func() error, put func(*os.File) error) (err error) {
	rel, abs := l.rel, l.path()
	if rel == "" {
		return errors.New("copy in: the site root is not a file")
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		return fmt.Errorf("copy in %s: is a directory", apiPath(rel))
	}
	tmp, err := fsutil.OpenTemp(ctx, abs)
	if err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	committed := false
	defer func() {
		if err != nil && !committed {
			fsutil.Discard(tmp)
		}
	}()
	n, err := copyBuffer(tmp, &countingReader{ctx: ctx, r: r, prog: &progress{fn: beat}})
	if err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("copy in %s: got %d bytes, expected %d", apiPath(rel), n, size)
	}
	err = tmp.Chmod(0o644)
	if err == nil && !mtime.IsZero() {
		err = setAtimeMtimeOf(tmp, mtime)
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		committed = true // Commit renames or discards it
		if put == nil {
			err = fsutil.Commit(tmp, abs)
		} else {
			err = fsutil.CommitBy(tmp, put)
		}
	}
	if err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	if now, ok := root.state.whereNow(abs); ok && now != rel {
		return nil // its folder was moved: rel is another file's now
	}
	return root.state.forgetTree(rel)
}

// Stat describes one path like Walk does, with its migration record when
// the file is premigrated or migrated (nil otherwise).
func (r *Root) Stat(p string) (Entry, *Record, error) {
	it, err := (&walker{root: r}).describe(p)
	if err != nil {
		return Entry{}, nil, err
	}
	if it.Type == "" {
		return Entry{}, nil, fmt.Errorf("stat %s: unsupported file type %s", it.Path, it.mode.Type())
	}
	if it.State == Resident {
		return it.Entry, nil, nil
	}
	return it.Entry, it.rec, nil
}

func timeFromNs(ns int64) time.Time { return time.Unix(0, ns) }
