package site

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/internal/fault"
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
// resident: its current content is the user's truth. An empty stub's
// mtime is no sign of that: touched (touch, a backup's restore, a build
// tool), it still holds no byte of its user's; taken for resident, its
// placeholder was premigrated over its record and its data collected. A
// stub that keeps bytes (stub_size; the whole of a small file) may have
// had them rewritten at the same size, which only its mtime tells.
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
		return size == rec.StubSize && (rec.StubSize == 0 || mtime == rec.Mtime)
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
	// root and dir are the site root (see follow); without them (some
	// tests) index records are not followed.
	root *os.File
	dir  string
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

// set signs and stores rec for the file abs reaches, whose path is rel.
// A record kept in the index then follows the file if it moved meanwhile.
func (s *stateStore) set(abs, rel string, rec Record) error {
	indexed, err := s.store(abs, rel, rec)
	if err != nil || indexed == nil {
		return err
	}
	return s.follow(abs, rel, *indexed)
}

// indexRecordWriting, nil outside tests, is called right before a record
// is written to the index: the instant a move of a folder above the file
// may run whole.
var indexRecordWriting func(rel string)

// store signs and stores rec, in the file's attributes or at rel in the
// index; it returns the signed record if it went to the index.
func (s *stateStore) store(abs, rel string, rec Record) (indexed *Record, err error) {
	if done, err := s.storeAttr(abs, rel, rec); err != nil {
		return nil, err
	} else if done {
		return nil, s.index.remove(rel) // an older record of the file
	}
	if err := s.signer.sign(&rec); err != nil {
		return nil, fmt.Errorf("record state of %s: %w", apiPath(rel), err)
	}
	if indexRecordWriting != nil {
		indexRecordWriting(rel)
	}
	if err := s.index.set(rel, rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// storeAttr signs and stores rec in the file's attributes, on a site that
// keeps records there; done is false (and err nil) where they cannot be
// written (a file read-only to a non-root worker, a mount without
// xattrs), for the index to keep the record instead. The index's record
// at rel, if any, is the caller's to remove.
func (s *stateStore) storeAttr(abs, rel string, rec Record) (done bool, err error) {
	if !s.xattr {
		return false, nil
	}
	if err := s.signer.sign(&rec); err != nil {
		return false, fmt.Errorf("record state of %s: %w", apiPath(rel), err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	if err := s.marks.mark(abs); err != nil {
		return false, fmt.Errorf("record state of %s: %w", apiPath(rel), err)
	}
	fault.Point("marks.marked")
	err = lsetxattr(abs, recordXattr, b)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errXattrUnsupported), errors.Is(err, fs.ErrPermission):
		return false, nil
	}
	return false, fmt.Errorf("record state of %s: %w", apiPath(rel), err)
}

// errMovedWhileRecorded: the file left its path while its record was
// written, for a place the record cannot follow it to.
var errMovedWhileRecorded = errors.New("the file was moved or replaced while its state was recorded")

// follow checks that the index record rec, just written at rel for the
// file abs reaches, is at that file's path. The index keeps records by
// path, and a move of a folder above the file (a C+J space to the trash, a
// site_sync's replayed move) carries the records it finds; a step that
// located its file before such a move, and writes its record after the
// move took the folder's records, writes at the old path, where the record
// would be lost (and with it, once the data is released, the file). So
// rel is looked up again from the root: if it no longer holds the file,
// the record is written where the file is now (abs reaches the file
// through its folder's descriptor, which knows where that folder went)
// and looked up there in turn. A move that starts after a look-up found
// the file carries the record with the others.
func (s *stateStore) follow(abs, rel string, rec Record) error {
	if s.root == nil {
		return nil
	}
	for range 8 {
		if st, err := s.statRel(rel); err == nil && uint64(st.Ino) == rec.Ino { //nolint:unconvert // not uint64 everywhere
			return nil
		}
		now, ok := s.whereNow(abs)
		if !ok || now == rel {
			return fmt.Errorf("record state of %s: %w", apiPath(rel), errMovedWhileRecorded)
		}
		if err := s.index.set(now, rec); err != nil {
			return err
		}
		if cur, err := s.index.get(rel); err == nil && cur != nil && *cur == rec {
			_ = s.index.remove(rel) // names a file no longer there
		}
		rel = now
	}
	return fmt.Errorf("record state of %s: %w (it kept moving)", apiPath(rel), errMovedWhileRecorded)
}

// statRel describes rel, looked up from the root now, without following
// symlinks.
func (s *stateStore) statRel(rel string) (unix.Stat_t, error) {
	dir, name := path.Split(rel)
	d, err := openBeneath(s.root, strings.TrimSuffix(dir, "/"), oDirPath, 0)
	if err != nil {
		return unix.Stat_t{}, err
	}
	defer d.Close()
	return fstatat(fdOf(d), name)
}

// whereNow is the path below the root of the file abs reaches through
// its folder's descriptor (see loc), wherever that folder was moved to.
func (s *stateStore) whereNow(abs string) (string, bool) {
	dir, name := filepath.Split(abs)
	at, err := os.Readlink(filepath.Clean(dir))
	if err != nil || !filepath.IsAbs(at) {
		return "", false
	}
	rel, err := filepath.Rel(s.dir, filepath.Join(at, name))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
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
