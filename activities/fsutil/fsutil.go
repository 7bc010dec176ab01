// Package fsutil holds the file-writing rules the site and target
// activities share: data is written to a temporary file next to its
// destination and renamed into place, so readers never see half a file,
// and a writer killed mid-write leaves nothing that a retry does not
// clean up.
package fsutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/thehub/hub/internal/fault"
)

// TmpPrefix marks the temporary files being written; listings hide them.
const TmpPrefix = ".hub-tmp-"

// TempName is the one temporary file name of dst.
func TempName(dst string) string {
	name := TmpPrefix + filepath.Base(dst)
	if len(name) > 255 { // NAME_MAX
		sum := sha256.Sum256([]byte(filepath.Base(dst)))
		name = TmpPrefix + hex.EncodeToString(sum[:16])
	}
	return filepath.Join(filepath.Dir(dst), name)
}

// PrivateName is a fixed name of the hub's own beside dst, for one kind
// of use ("xchg", "del"): where a file of dst's is parked for a moment,
// and where a rerun after a kill finds it. OpenTemp never opens such a
// name (a user's name never starts with TmpPrefix, so its TempName never
// starts with it twice), so no writer takes a parked file for a temporary
// file of its own.
func PrivateName(kind, dst string) string {
	base := filepath.Base(dst)
	name := PrivatePrefix(kind) + base
	if len(name) > 255 { // NAME_MAX
		sum := sha256.Sum256([]byte(base))
		name = PrivatePrefix(kind) + hex.EncodeToString(sum[:16])
	}
	return filepath.Join(filepath.Dir(dst), name)
}

// PrivatePrefix starts every PrivateName of kind.
func PrivatePrefix(kind string) string { return TmpPrefix + TmpPrefix + kind + "-" }

// errInTheWay: something the hub did not write holds the temporary name
// of a destination; it is left untouched.
var errInTheWay = errors.New("in the way of the hub's temporary file (the " + TmpPrefix + " prefix is reserved)")

// lockWait bounds how long a writer waits for another write of the same
// destination, so that a waiting activity fails (and is retried) well
// before its heartbeat times out.
const lockWait = 10 * time.Second

// tmpMarker is set on the temporary files the hub creates, so that a file
// someone else made under a temporary name is never truncated.
const tmpMarker = "user.hub.tmp"

// OpenTemp opens TempName(dst), empty and locked by this writer. The name
// is fixed per destination, so a write retried after its worker was killed
// reuses the dead writer's file instead of leaving it behind; the lock
// (which the kernel releases when a process dies) makes a concurrent
// writer of the same destination wait for the first, at most lockWait.
// On a filesystem that cannot lock (NFS without a lock service), every
// write takes a fresh name instead, so two writers never share a file.
//
// Only a file the hub made is reused: a symlink, a folder, a hard-linked,
// special or foreign file, or (where the filesystem keeps extended
// attributes) a non-empty file without the hub's marker stays as it is,
// and the write goes to a fresh file of a random name instead.
//
// The caller writes, then calls Commit (or Discard to give up).
func OpenTemp(ctx context.Context, dst string) (*os.File, error) {
	name := TempName(dst)
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	for {
		f, created, err := openNoFollow(name)
		switch {
		case errors.Is(err, errGone):
			continue // renamed away by a writer just now
		case errors.Is(err, errInTheWay):
			return openFresh(dst)
		case err != nil:
			return nil, err
		}
		if created {
			fault.Point("temp.created")
			_ = setMarker(f) // before locking: a racing writer may check it
			fault.Point("temp.marked")
		}
		if err := lock(ctx, f); err != nil {
			_ = f.Close()
			if errors.Is(err, errNoLocks) {
				// Without locks nothing keeps a second writer of dst out of
				// the shared name, where each would truncate or overwrite
				// the other's data under the other's checksum: this write
				// takes a name of its own (one a kill leaves behind).
				if created {
					_ = os.Remove(name)
				}
				return openFresh(dst)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("%s: another write of this destination is in progress (%w)", dst, err)
			}
			return nil, err
		}
		// The previous holder may have renamed the file into place (or
		// removed it) before we got the lock: then start over.
		held, errHeld := f.Stat()
		named, errNamed := os.Lstat(name)
		if errHeld != nil || errNamed != nil || !os.SameFile(held, named) {
			_ = f.Close()
			continue
		}
		if !created && legacyExchangeAt(dst) {
			// The destination's former file, parked by an exchange of an
			// earlier version: moved to the private name exchanges park
			// files under now, where no write takes it and a sync's rerun
			// or a settling of leftovers keeps it beside dst, whatever
			// becomes of dst's mark (a reviewer's finding: the next write
			// but one emptied it).
			_ = f.Close()
			if err := renameNoReplace(name, PrivateName("xchg", dst)); err != nil {
				return openFresh(dst)
			}
			continue
		}
		if !created && !ours(f, held) {
			_ = f.Close()
			return openFresh(dst)
		}
		// An empty file without the marker (its writer was killed between
		// creating and marking it) is marked now: a kill of this write
		// leaves a file the next one reuses, not one nobody may touch.
		if !created {
			if marked, supported := Marked(f); supported && !marked {
				_ = setMarker(f)
			}
		}
		// A writer that held the file before us may have left part of
		// its content (it was killed, or it failed before Discard).
		if held.Size() != 0 {
			if err := f.Truncate(0); err != nil {
				_ = f.Close()
				return nil, err
			}
		}
		return f, nil
	}
}

// openNoFollow creates name, or opens the file already there without
// following a symlink (which fails) or blocking on a FIFO.
func openNoFollow(name string) (f *os.File, created bool, err error) {
	f, err = OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(name, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, errGone
	case err != nil: // a symlink, a folder, a file we may not open: not ours
		return nil, false, fmt.Errorf("%s: %w (%v)", name, errInTheWay, err)
	}
	return f, false, nil
}

// errGone: the temporary name vanished between two opens.
var errGone = errors.New("temporary file gone")

// openFresh is for a destination whose temporary name holds something the
// hub will not touch: a new file under a random name next to it, created
// exclusively (so never through a link). Only this case can leave a file
// behind if the writer is killed.
func openFresh(dst string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(dst), filepath.Base(TempName(dst))+".*")
}

// legacyExchangeAt tells whether dst carries the exchange mark of a
// version before exchanges parked files under a private name: its
// temporary name then holds the destination's former file (which may
// carry a stale marker), for the sync's rerun to keep, never a write's
// to reuse and empty (a reviewer's finding).
func legacyExchangeAt(dst string) bool {
	f, err := OpenFile(dst, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return LegacyExchanged(f)
}

// ours tells whether an existing temporary file may be reused: a plain
// file with one link, owned by this process's user, that the hub marked
// (or that is empty, or that sits on a filesystem without extended
// attributes). Anyone else's file is left alone.
func ours(f *os.File, fi os.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink != 1 || int(st.Uid) != os.Geteuid() {
		return false
	}
	if fi.Size() == 0 {
		return true
	}
	marked, supported := Marked(f)
	return marked || !supported
}

// Commit renames a temporary file from OpenTemp onto dst, then unlocks
// it; if the rename fails, the file is discarded. Either way the caller is
// done with f.
//
// The hub's marker is dropped after the rename, through the open file: a
// crash before the rename leaves a marked temporary file, which the retry
// reuses, never an unmarked one that nobody may touch. (A crash just after
// the rename leaves the marker on the stored file, where it means nothing:
// only temporary names are ever reused.)
func Commit(f *os.File, dst string) error { return CommitThen(f, dst, nil) }

// CommitThen is Commit that runs then (unless nil) on f once it is in
// place and its marker dropped, before closing it. An attribute set
// there is the file's only one, which ext4 keeps in the inode if it is
// small; set beside the marker, both would move to a block of their own,
// and stay there.
func CommitThen(f *os.File, dst string, then func(f *os.File)) error {
	return commit(f, func(f *os.File) error { return rename(f.Name(), dst) }, then)
}

// CommitBy is Commit with the rename done by put, for a caller that puts
// the file in place under conditions of its own. If put fails, the file
// is discarded (Discard: its name is removed only while it holds f).
func CommitBy(f *os.File, put func(f *os.File) error) error { return commit(f, put, nil) }

func commit(f *os.File, put func(f *os.File) error, then func(f *os.File)) error {
	fault.Point("commit.before-rename")
	if err := put(f); err != nil {
		Discard(f)
		return err
	}
	fault.Point("commit.renamed")
	clearMarker(f)
	if then != nil {
		fault.Point("commit.unmarked")
		then(f)
	}
	// Renamed: a Close error must not lead anyone to remove the temporary
	// name, which may already be another writer's, nor undo what the file
	// in place relies on.
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrClosedInPlace, err)
	}
	return nil
}

// ErrClosedInPlace: a commit's file was renamed into place, and closing it
// failed then.
var ErrClosedInPlace = errors.New("the file is in place, and closing it failed")

// OpenScratch opens a file for data that is checked and then copied over
// dst, never renamed onto it (a recall's download): an unnamed file in
// dst's folder (O_TMPFILE), on dst's filesystem but in no listing, so the
// folder's users see nothing and its modification time stays; it vanishes
// with its last descriptor, even if the process is killed. Where the
// filesystem cannot make unnamed files, it is OpenTemp's file. release
// closes and removes it either way.
func OpenScratch(ctx context.Context, dst string) (f *os.File, release func(), err error) {
	if f, err := openUnnamed(filepath.Dir(dst)); err == nil {
		return f, func() { _ = f.Close() }, nil
	}
	f, err = OpenTemp(ctx, dst)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { Discard(f) }, nil
}

// Discard removes a temporary file from OpenTemp and then unlocks it, in
// that order, so a waiting writer starts afresh. The name is removed only
// while it holds f: a caller's put (CommitBy) may have left another file
// there.
func Discard(f *os.File) {
	held, err := f.Stat()
	if named, errNamed := os.Lstat(f.Name()); err == nil && errNamed == nil && os.SameFile(held, named) {
		_ = os.Remove(f.Name())
	}
	_ = f.Close()
}

// lock takes an exclusive flock on f, waiting while another writer holds
// it, until ctx ends. Where the filesystem has no locks (NFS without a
// lock daemon, some FUSE filesystems) it writes unlocked, as before locks
// were used.
func lock(ctx context.Context, f *os.File) error {
	for {
		err := flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EINVAL):
			return errNoLocks
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// InUse tells whether a writer holds f's lock: a write in flight (see
// OpenTemp). Where the filesystem has no locks it says false.
func InUse(f *os.File) bool {
	err := flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// errNoLocks: the filesystem cannot lock files (NFS without a lock
// service, some FUSE filesystems).
var errNoLocks = errors.New("the filesystem cannot lock files")

// flock is syscall.Flock; tests make it refuse.
var flock = syscall.Flock

// WriteFile replaces name with data durably (mode perm): readers see the
// old or the new content, never a mix, and a crash leaves no stray file.
func WriteFile(name string, data []byte, perm os.FileMode) error {
	f, err := OpenTemp(context.Background(), name)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		Discard(f)
		return err
	}
	if err := Commit(f, name); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(name))
}

// SyncDir makes a folder's entries (a rename into it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
