package site

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/thehub/hub/activities/fsutil"
)

// State is a file's migration state.
type State string

// Migration states. Directories and symlinks are always Resident.
const (
	// Resident files have their data only locally.
	Resident State = "resident"
	// Premigrated files have their data locally and on a target.
	Premigrated State = "premigrated"
	// Migrated files are stubs whose data lives on a target.
	Migrated State = "migrated"
)

// Interrupted operations recorded in Record.Pending.
const (
	pendingRelease = "release" // Migrate is truncating the file
	pendingRecall  = "recall"  // Recall is writing the data back
)

// Record is the migration state kept with a file, in the user.hub.record
// extended attribute or in the site index.
type Record struct {
	State State `json:"state"`
	// Size and Mtime (Unix ns) are the file's original size and mtime.
	Size  int64 `json:"size"`
	Mtime int64 `json:"mtime"`
	// Target and Key locate the remote copy.
	Target string `json:"target"`
	Key    string `json:"key"`
	// Checksum is the hex SHA-256 of the original content.
	Checksum string `json:"sha256"`
	// StubSize is the number of bytes a migrated file keeps locally.
	StubSize int64 `json:"stub,omitempty"`
	// Ino ties an index record to one inode, so a file replaced under the
	// same name does not inherit it (xattrs get that for free).
	Ino uint64 `json:"ino,omitempty"`
	// Pending names a step that changes the data and was started; it lets
	// a crashed Migrate or Recall be resumed instead of mistaking the
	// half-done file for a modified one.
	Pending string `json:"pending,omitempty"`
	// Btime is the file's birth time (Unix ns) where the filesystem keeps
	// one: with Ino it names one file for good, as inode numbers are reused.
	Btime int64 `json:"btime,omitempty"`
	// Ref names this record's reference on the target (refs/<sha256>/<ref>),
	// which keeps the remote copy from being collected. Records of the
	// legacy layout (Key is the file's path) have none.
	Ref string `json:"ref,omitempty"`
	// Sig is the site's HMAC of every other field: records are kept where
	// the file's owner can write them, so the site trusts only its own.
	Sig string `json:"sig,omitempty"`

	// fromXattr is set on records read from the file's own attributes,
	// which cannot be stale for another inode: a mismatch means a copy.
	fromXattr bool
}

// matches reports whether the record still describes fi. A file modified
// after it was premigrated or migrated no longer matches, and is
// resident: its current content is the user's truth.
func (rec *Record) matches(fi fs.FileInfo) bool {
	if rec == nil || !fi.Mode().IsRegular() {
		return false
	}
	if rec.Ino != 0 && rec.Ino != inode(fi) && !rec.fromXattr {
		return false // an index record of a file since replaced
	}
	size, mtime := fi.Size(), fi.ModTime().UnixNano()
	switch {
	case rec.State == Premigrated:
		return size == rec.Size && mtime == rec.Mtime
	case rec.State == Migrated && rec.Pending == "":
		return size == rec.StubSize && mtime == rec.Mtime
	case rec.State == Migrated && rec.Pending == pendingRelease:
		// The size is either side of the truncate, which moved the mtime.
		// Whole, the file still has its recorded mtime: one written since
		// (same size, other mtime) is its user's, and resident.
		return size == rec.StubSize || (size == rec.Size && mtime == rec.Mtime)
	case rec.State == Migrated && rec.Pending == pendingRecall:
		return size >= rec.StubSize && size <= rec.Size
	}
	return false
}

// effective returns the state of a file given its record.
func (rec *Record) effective(fi fs.FileInfo) State {
	if rec.matches(fi) {
		return rec.State
	}
	return Resident
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// links is the number of names (hard links) a file has; 1 where unknown.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

func device(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev) //nolint:unconvert // Dev is not uint64 on every platform
	}
	return 0
}

// recordXattr is the extended attribute holding a JSON Record.
const recordXattr = "user.hub.record"

// stateStore keeps records in xattrs when the filesystem supports them
// and in the index otherwise. Reads consult both, so a file on a mount
// without xattr support below an xattr-capable root still works.
type stateStore struct {
	xattr  bool
	index  *index
	signer *signer
	// marks, with xattrs, name the folders that may hold records.
	marks *folderMarks
}

func openStateStore(dir string, useXattr bool) *stateStore {
	s := &stateStore{xattr: useXattr, index: sharedIndex(dir), signer: sharedSigner(dir)}
	if useXattr {
		s.marks = newFolderMarks(dir)
	}
	return s
}

// get returns the record stored for the file, or nil.
func (s *stateStore) get(abs, rel string) (*Record, error) { return s.getAt(entryAt{}, abs, rel) }

// getAt is get for a file a walk found (see entryAt).
func (s *stateStore) getAt(at entryAt, abs, rel string) (*Record, error) {
	if s.xattr && !at.noAttr {
		b, err := lgetxattrAt(at, abs, recordXattr)
		switch {
		case err == nil:
			var rec Record
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, fmt.Errorf("state of %s: %w: %w", apiPath(rel), ErrUntrustedRecord, err)
			}
			rec.fromXattr = true
			return &rec, nil
		case !errors.Is(err, errNoAttr) && !errors.Is(err, errXattrUnsupported):
			return nil, fmt.Errorf("state of %s: %w", apiPath(rel), err)
		}
	}
	if at.noIndex {
		return nil, nil
	}
	return s.index.get(rel)
}

// set signs and stores rec for the file.
func (s *stateStore) set(abs, rel string, rec Record) error {
	if err := s.signer.sign(&rec); err != nil {
		return fmt.Errorf("record state of %s: %w", apiPath(rel), err)
	}
	if s.xattr {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := s.marks.mark(abs); err != nil {
			return fmt.Errorf("record state of %s: %w", apiPath(rel), err)
		}
		fsutil.Fault("marks.marked")
		err = lsetxattr(abs, recordXattr, b)
		if err == nil {
			return s.index.remove(rel)
		}
		// Files whose attributes we may not write (read-only to a non-root
		// worker, or on a mount without xattrs) use the index instead.
		if !errors.Is(err, errXattrUnsupported) && !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("record state of %s: %w", apiPath(rel), err)
		}
	}
	return s.index.set(rel, rec)
}

// clear forgets the file's record (it becomes resident).
func (s *stateStore) clear(abs, rel string) error {
	if s.xattr {
		err := lremovexattr(abs, recordXattr)
		if err != nil && !errors.Is(err, errNoAttr) && !errors.Is(err, errXattrUnsupported) && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("clear state of %s: %w", apiPath(rel), err)
		}
	}
	return s.index.remove(rel)
}

// forgetTree drops index records at or below rel after it was removed or
// replaced; xattrs disappear with their inodes.
func (s *stateStore) forgetTree(rel string) error {
	return s.index.removeTree(rel)
}

// sync makes state written so far durable before data is destroyed.
func (s *stateStore) sync() error {
	return s.index.sync()
}
