package site

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Folder marks tell a policy scan which folders may hold files with a
// state record in their attributes, so that it reads the attribute of the
// files of those folders only (one getxattr per file is a third of a
// scan). Before the site first writes a record on a file it marks the
// file's folder, by device and inode so that a renamed folder keeps its
// mark, with an empty file in the root's .hub folder, which users do not
// write.
//
// A mark is a hint for selecting files, never for moving data: every step
// reads the file's record itself before acting. A record a user carried
// into an unmarked folder (mv of a stub, a restore from a backup) is seen
// by a policy scan as a resident file of the stub's size; the step then
// finds the record and skips it ("already migrated"). Stale marks (of a
// folder since removed, its inode reused) only cost attribute reads.
//
// The marks are complete, and used, once the file "complete" is in their
// folder: written when a site without a record key (so without records)
// first opens its root, or by a full scan of the file index, which marks
// every folder where it finds a record. Until then scans read every
// attribute, as a site of an earlier version must.
const (
	folderMarksDir = "xattr-folders"
	marksComplete  = "complete"
)

type folderMarks struct {
	dir      string   // <root>/.hub/xattr-folders
	done     sync.Map // "dev-ino" of folders marked by this process
	complete atomic.Bool
	// cleanMargin is how long a folder must be unchanged before a walk
	// stamps it clean (see cleanFoldersDir); tests shorten it.
	cleanMargin time.Duration
}

func newFolderMarks(rootDir string) *folderMarks {
	m := &folderMarks{dir: filepath.Join(rootDir, hubDir, folderMarksDir), cleanMargin: cleanMargin}
	if _, err := os.Stat(filepath.Join(m.dir, marksComplete)); err == nil {
		m.complete.Store(true)
	} else if _, err := os.Stat(filepath.Join(rootDir, hubDir, recordKeyFile)); absent(err) && !signedBefore(filepath.Join(rootDir, hubDir)) {
		// No key and none lost, so no record the site would trust:
		// nothing to mark.
		_ = m.setComplete()
	}
	return m
}

// ErrXattrsUnreadable: see hasFolderMarks.
var ErrXattrsUnreadable = errors.New("records of this site are kept in extended attributes (folders are marked in " + hubDir + "/" + folderMarksDir + "), which this node cannot read where it reaches the root (a mount without user xattrs?): serve the site from a node that can")

// hasFolderMarks tells whether a folder of the root at rootDir is marked:
// a record was kept in a file's attributes. A node of the site that
// cannot read them (the root reached through a mount without user xattrs)
// refuses the root (NewRoot) instead of taking every stub for a resident
// file (its audit dropped every reference, and the collector freed the
// content).
func hasFolderMarks(rootDir string) bool {
	d, err := os.Open(filepath.Join(rootDir, hubDir, folderMarksDir))
	if err != nil {
		return false
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(16)
		for _, n := range names {
			dev, ino, ok := strings.Cut(n, "-") // see markName
			if _, err := strconv.ParseUint(dev, 10, 64); ok && err == nil {
				if _, err := strconv.ParseUint(ino, 10, 64); err == nil {
					return true
				}
			}
		}
		if err != nil {
			return false
		}
	}
}

// setComplete records that every folder holding a record is marked.
func (m *folderMarks) setComplete() error {
	// An empty file cannot be torn; one lost in a crash only makes scans
	// read every attribute again.
	if err := m.touch(marksComplete); err != nil {
		return err
	}
	m.complete.Store(true)
	return nil
}

// touch creates the empty file name in the marks folder.
func (m *folderMarks) touch(name string) error {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(m.dir, name), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func markName(fi fs.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d-%d", uint64(st.Dev), st.Ino), true //nolint:unconvert // Dev is not uint64 on every platform
}

// mark marks the folder holding the file abs. It is written before the
// record, so a record never sits in an unmarked folder the site wrote it
// in; it need not be durable first, since a lost mark only makes a policy
// scan see that folder's files as resident.
func (m *folderMarks) mark(abs string) error {
	fi, err := os.Stat(filepath.Dir(abs))
	if err != nil {
		return err
	}
	name, ok := markName(fi)
	if !ok {
		return nil
	}
	if _, ok := m.done.Load(name); ok {
		return nil
	}
	if err := m.touch(name); err != nil {
		return fmt.Errorf("mark folder of %s: %w", abs, err)
	}
	m.done.Store(name, true)
	return nil
}

// unmarked reports whether the folder held open as d certainly has no
// mark while the marks are complete; any doubt (or no marks: a root
// without xattrs) answers false.
func (m *folderMarks) unmarked(d *os.File) bool {
	_, _, ok := m.unmarkedStat(d)
	return ok
}

// unmarkedStat is unmarked, with the folder's status and mark name.
func (m *folderMarks) unmarkedStat(d *os.File) (st *syscall.Stat_t, name string, ok bool) {
	if m == nil || !m.complete.Load() {
		return nil, "", false
	}
	fi, err := d.Stat()
	if err != nil {
		return nil, "", false
	}
	st, _ = fi.Sys().(*syscall.Stat_t)
	name, ok = markName(fi)
	if !ok || st == nil {
		return nil, "", false
	}
	if _, ok := m.done.Load(name); ok {
		return nil, "", false
	}
	_, err = os.Lstat(filepath.Join(m.dir, name))
	return st, name, absent(err)
}

// Clean stamps let discovery (Walk) skip the state attributes of the files
// of a folder that a walk found without any record, for as long as no
// entry of the folder has changed since. A record only gets into an
// unmarked folder by an entry being added to it (a stub moved or linked
// in, a restored file), and that changes the folder's ctime, which no
// user can set. So a stamp holds the folder's ctime at the time of the
// walk that found it clean (as the stamp file's mtime) and counts only
// while the folder still has that ctime, is unmarked, and the marks are
// complete (the site marks a folder before it writes a record in it).
//
// A walk stamps a folder only when it read the attribute of every file in
// it, found no record and no error, saw the same ctime before and after
// reading, and that ctime is cleanMargin older than the walk: a change
// just after the walk read the folder could otherwise keep the same ctime
// on a filesystem whose clock is coarse. A stamp torn by a crash has the
// time of its creation as mtime, never an old ctime, so it counts for
// nothing.
const cleanFoldersDir = "clean-folders"

const cleanMargin = 2 * time.Second

// folderClean is what a walk learns of a folder before reading it.
type folderClean struct {
	name      string    // "dev-ino"
	ctime     time.Time // zero where the platform does not report it
	clean     bool      // its files' attributes need not be read
	stampable bool      // a walk that finds no record may stamp it
}

// cleanState looks at the folder held open as d for a walk that started
// at start.
func (m *folderMarks) cleanState(d *os.File, start time.Time) folderClean {
	st, name, unmarked := m.unmarkedStat(d)
	if !unmarked {
		return folderClean{}
	}
	_, ctime := accessChangeTimes(st)
	if ctime.IsZero() {
		return folderClean{}
	}
	s := folderClean{name: name, ctime: ctime, stampable: ctime.Before(start.Add(-m.cleanMargin))}
	if stamp, err := os.Lstat(filepath.Join(m.dir, cleanFoldersDir, name)); err == nil {
		s.clean = stamp.Mode().IsRegular() && stamp.ModTime().Equal(ctime)
	}
	return s
}

// stamp records that the folder held open as d, read by a walk that saw
// s before reading it, holds no record. A folder whose ctime moved in the
// meantime is left unstamped. Errors only cost the next walk its speed.
func (m *folderMarks) stamp(d *os.File, s folderClean) {
	if !s.stampable {
		return
	}
	fi, err := d.Stat()
	if err != nil {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok {
		return
	} else if _, ctime := accessChangeTimes(st); !ctime.Equal(s.ctime) {
		return
	}
	dir := filepath.Join(m.dir, cleanFoldersDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return
	}
	name := filepath.Join(dir, s.name)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	_ = f.Close()
	ts := unix.NsecToTimespec(s.ctime.UnixNano())
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
