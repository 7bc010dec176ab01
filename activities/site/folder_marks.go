package site

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
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
}

func newFolderMarks(rootDir string) *folderMarks {
	m := &folderMarks{dir: filepath.Join(rootDir, hubDir, folderMarksDir)}
	if _, err := os.Stat(filepath.Join(m.dir, marksComplete)); err == nil {
		m.complete.Store(true)
	} else if _, err := os.Stat(filepath.Join(rootDir, hubDir, recordKeyFile)); absent(err) {
		// No key, so no record the site would trust: nothing to mark.
		_ = m.setComplete()
	}
	return m
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
	if m == nil || !m.complete.Load() {
		return false
	}
	fi, err := d.Stat()
	if err != nil {
		return false
	}
	name, ok := markName(fi)
	if !ok {
		return false
	}
	if _, ok := m.done.Load(name); ok {
		return false
	}
	_, err = os.Lstat(filepath.Join(m.dir, name))
	return absent(err)
}
