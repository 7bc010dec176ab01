package site

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/internal/fault"
)

// The state index is used where extended attributes are not available.
// Every node of a site (each a separate worker process, maybe on another
// host) shares the root, so the index is shared too, and it is kept on
// disk only: one small file per record, read afresh on every lookup and
// replaced atomically (temporary file, fsync, rename) on every change.
// Writers of different paths never touch the same file, writers of one
// path replace it whole (the last one wins), and no process holds a copy
// that could go stale. See docs/site-state-index.md.
//
// The record files mirror the root's tree under .hub/state: the record of
// "a/b/c.txt" is .hub/state/+a/+b/=c.txt, so the records at or below a
// folder are exactly one folder of the index, removed in one go. A folder
// is named "+" + its name and a record "=" + the file's name; a name too
// long for the prefix is replaced by its SHA-256 ("#" + hex for folders,
// "@" + hex for records). Temporary files (fsutil.TmpPrefix) start with
// a dot, which no entry of the index does.
//
// A record file holds the JSON {"p": path, "r": record}, the record as
// the site signed it.
const (
	indexDir        = "state"       // in .hub: the per-path records
	indexLockFile   = "state.lock"  // in .hub: held while the old log is imported
	movesLockFile   = "moves.lock"  // in .hub: held by a move of files with their records
	legacyIndexFile = "state.jsonl" // in .hub: the log of earlier versions
	legacyImported  = legacyIndexFile + ".migrated"

	folderPrefix       = "+"
	recordPrefix       = "="
	hashedFolderPrefix = "#"
	hashedRecordPrefix = "@"
	// maxPlainName is the longest name kept as is: NAME_MAX less the
	// prefix.
	maxPlainName = 255 - 1
	// maxRecordSize bounds what a lookup reads; records are far smaller.
	maxRecordSize = 1 << 20
	// writeAttempts bounds the retries of a write whose folder was removed
	// under it by another process (a removal of its last record, or of
	// the tree around it).
	writeAttempts = 20
	// importLockWait bounds how long a process waits for another one to
	// finish importing the old log before failing (the step is retried),
	// well before a site activity's heartbeat times out.
	importLockWait = 10 * time.Second
	// maxDirty bounds the folders remembered for the next sync: a process
	// that writes records in more folders than that without syncing (a
	// long premigration) syncs them on the way.
	maxDirty = 4096
)

// indexLine is the content of a record file, and a line of the old log
// (where a line without "r" removed the path's record).
type indexLine struct {
	Path   string  `json:"p"`
	Record *Record `json:"r,omitempty"`
}

// index is the state index of one root. It holds no records: any number
// of index values, in any number of processes, may work on the same root
// at once. sharedIndex hands out one per root and process only so that the
// old log is checked for once and sync covers every activity's writes.
type index struct {
	hub string // the root's .hub folder
	dir string // hub/state

	imported atomic.Bool // the old log was imported, or there is none
	importMu sync.Mutex

	// dirty holds the folders of the index whose entries changed since
	// the last sync; syncMu serialises syncs, so that a sync returns only
	// once the changes made before it are durable, even those another
	// sync already took on.
	mu     sync.Mutex
	dirty  map[string]struct{}
	syncMu sync.Mutex
}

var indexes sync.Map // root dir -> *index

func sharedIndex(rootDir string) *index {
	ix, _ := indexes.LoadOrStore(rootDir, newIndex(rootDir))
	return ix.(*index)
}

// newIndex opens the index of the root at rootDir, independent of any
// other index value of the same root (as another process's would be).
func newIndex(rootDir string) *index {
	hub := filepath.Join(rootDir, hubDir)
	return &index{hub: hub, dir: filepath.Join(hub, indexDir)}
}

// entryName is the index's name for a folder or a file of the root.
func entryName(name string, record bool) string {
	if len(name) <= maxPlainName {
		if record {
			return recordPrefix + name
		}
		return folderPrefix + name
	}
	sum := sha256.Sum256([]byte(name))
	if record {
		return hashedRecordPrefix + hex.EncodeToString(sum[:])
	}
	return hashedFolderPrefix + hex.EncodeToString(sum[:])
}

// errNoRecordPath: the root itself, or a path that is not clean, has no
// record.
var errNoRecordPath = errors.New("no index record for this path")

// paths returns the record file of rel and the index folder holding the
// records below it.
func (ix *index) paths(rel string) (record, folder string, err error) {
	if rel == "" {
		return "", "", errNoRecordPath
	}
	var b strings.Builder
	b.Grow(len(ix.dir) + 2*len(rel) + 2) // enough unless names are hashed
	b.WriteString(ix.dir)
	for {
		p, rest, more := strings.Cut(rel, "/")
		if p == "" || p == "." || p == ".." {
			return "", "", errNoRecordPath
		}
		b.WriteByte('/')
		if !more {
			parent := b.String()
			return parent + entryName(p, true), parent + entryName(p, false), nil
		}
		writeEntryName(&b, p, false)
		rel = rest
	}
}

func writeEntryName(b *strings.Builder, name string, record bool) {
	if len(name) > maxPlainName {
		b.WriteString(entryName(name, record))
		return
	}
	if record {
		b.WriteString(recordPrefix)
	} else {
		b.WriteString(folderPrefix)
	}
	b.WriteString(name)
}

// absent reports an error meaning that there is no such entry. A path too
// long for the filesystem is absent too: the names of the index depend on
// the path alone, so nothing was ever written there.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG)
}

func (ix *index) get(rel string) (*Record, error) {
	if err := ix.ensureImported(); err != nil {
		return nil, err
	}
	name, _, err := ix.paths(rel)
	if err != nil {
		return nil, nil
	}
	l, err := readRecordFile(name)
	switch {
	case absent(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("state index: %w", err)
	case l.Path != rel || l.Record == nil:
		return nil, fmt.Errorf("state index: %s: %w: its index file holds the record of %q", apiPath(rel), ErrUntrustedRecord, l.Path)
	}
	return l.Record, nil
}

// namesIn returns the names of the files of the folder dir ("" for the
// root) that the index holds records of.
func (ix *index) namesIn(dir string) []string {
	folder := ix.dir
	if dir != "" {
		_, f, err := ix.paths(dir)
		if err != nil {
			return nil
		}
		folder = f
	}
	entries, err := os.ReadDir(folder)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), recordPrefix) && !strings.HasPrefix(e.Name(), hashedRecordPrefix) {
			continue
		}
		if l, err := readRecordFile(filepath.Join(folder, e.Name())); err == nil && path.Dir("/"+l.Path) == "/"+dir {
			names = append(names, path.Base(l.Path))
		}
	}
	return names
}

// readRecordFile reads one record file, never through a symlink nor
// blocking on anything but a regular file.
func readRecordFile(name string) (*indexLine, error) {
	// Most lookups find no record: the bare system call keeps those cheap.
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if absent(err) {
		return nil, err
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: not a regular file", name, ErrUntrustedRecord)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecordSize))
	if err != nil {
		return nil, err
	}
	var l indexLine
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrUntrustedRecord, err)
	}
	return &l, nil
}

func (ix *index) set(rel string, rec Record) error {
	if err := ix.ensureImported(); err != nil {
		return err
	}
	name, _, err := ix.paths(rel)
	if err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	b, err := json.Marshal(indexLine{Path: rel, Record: &rec})
	if err != nil {
		return err
	}
	return ix.write(name, b, true)
}

// write replaces the record file name with data. With durable, the data
// is flushed before the rename, so that a crash leaves the old record or
// the new one, never an empty file; the rename itself is made durable by
// sync. A folder removed under the write by another process (after its
// last record went) is made again.
func (ix *index) write(name string, data []byte, durable bool) error {
	dir := filepath.Dir(name)
	for attempt := 1; ; attempt++ {
		err := writeOnce(dir, name, data, durable)
		if err == nil {
			if ix.markDirty(dir) > maxDirty {
				return ix.sync()
			}
			return nil
		}
		// The folder went away under us (ENOENT), or MkdirAll found it
		// made by another writer and then gone again before its check
		// (EEXIST): either way, make it again.
		if !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist)) || attempt == writeAttempts {
			return fmt.Errorf("state index: %w", err)
		}
	}
}

func writeOnce(dir, name string, data []byte, durable bool) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := fsutil.OpenTemp(context.Background(), name)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if err != nil {
		fsutil.Discard(f)
		return err
	}
	return fsutil.Commit(f, name)
}

func (ix *index) remove(rel string) error {
	if err := ix.ensureImported(); err != nil {
		return err
	}
	name, _, err := ix.paths(rel)
	if err != nil {
		return nil
	}
	return ix.unlink(name)
}

// unlink removes one record file, then the folders of the index left
// empty above it.
func (ix *index) unlink(name string) error {
	err := syscall.Unlink(name)
	switch {
	case absent(err):
		return nil
	case err != nil:
		return fmt.Errorf("state index: %w", &fs.PathError{Op: "unlink", Path: name, Err: err})
	}
	ix.markDirty(filepath.Dir(name))
	ix.prune(filepath.Dir(name))
	return nil
}

// prune removes dir and its parents, up to the index's own folder, while
// they are empty. rmdir never removes a folder holding anything, so a
// record being written there by another process (its temporary file is
// in the folder) keeps it; a writer that made the folder and had not yet
// created its file retries.
func (ix *index) prune(dir string) {
	for strings.HasPrefix(dir, ix.dir+"/") {
		if err := syscall.Rmdir(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
		ix.markDirty(dir)
	}
}

func (ix *index) removeTree(rel string) error {
	if err := ix.ensureImported(); err != nil {
		return err
	}
	if rel == "" {
		return ix.removeAll()
	}
	name, folder, err := ix.paths(rel)
	if err != nil {
		return nil
	}
	// Another process writing a record below folder may put an entry back
	// while it is emptied: the removal is simply done again.
	err = os.RemoveAll(folder)
	for i := 0; i < writeAttempts && errors.Is(err, syscall.ENOTEMPTY); i++ {
		err = os.RemoveAll(folder)
	}
	if err != nil && !absent(err) {
		return fmt.Errorf("state index: %w", err)
	}
	if err := ix.unlink(name); err != nil {
		return err
	}
	ix.markDirty(filepath.Dir(folder))
	ix.prune(filepath.Dir(folder))
	return nil
}

// removeAll forgets every record of the root, leaving other writers'
// temporary files alone.
func (ix *index) removeAll() error {
	entries, err := os.ReadDir(ix.dir)
	if absent(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := os.RemoveAll(filepath.Join(ix.dir, e.Name())); err != nil && !absent(err) {
			return fmt.Errorf("state index: %w", err)
		}
	}
	ix.markDirty(ix.dir)
	return nil
}

// markDirty notes that the entries of dir changed, and returns how many
// folders are waiting for a sync.
func (ix *index) markDirty(dir string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.dirty == nil {
		ix.dirty = map[string]struct{}{}
	}
	ix.dirty[dir] = struct{}{}
	return len(ix.dirty)
}

// sync makes the index changes this process made so far durable: the
// record files were flushed when written, so what remains is the folders
// whose entries changed, and the folders above them (which may have been
// made for them).
func (ix *index) sync() error {
	ix.syncMu.Lock()
	defer ix.syncMu.Unlock()
	ix.mu.Lock()
	dirty := ix.dirty
	ix.dirty = nil
	ix.mu.Unlock()
	todo := map[string]struct{}{}
	for d := range dirty {
		for ; strings.HasPrefix(d, ix.hub+"/"); d = filepath.Dir(d) {
			todo[d] = struct{}{}
		}
	}
	if len(dirty) > 0 {
		todo[ix.hub] = struct{}{}
	}
	for d := range todo {
		if err := fsutil.SyncDir(d); err != nil && !absent(err) {
			ix.mu.Lock()
			if ix.dirty == nil {
				ix.dirty = map[string]struct{}{}
			}
			for d := range dirty {
				ix.dirty[d] = struct{}{}
			}
			ix.mu.Unlock()
			return fmt.Errorf("state index: %w", err)
		}
	}
	return nil
}

// ensureImported imports the log of earlier versions, once per index
// value: later, nothing writes it any more.
func (ix *index) ensureImported() error {
	if ix.imported.Load() {
		return nil
	}
	ix.importMu.Lock()
	defer ix.importMu.Unlock()
	if ix.imported.Load() {
		return nil
	}
	if err := ix.importLegacy(); err != nil {
		return fmt.Errorf("state index: import of %s: %w", legacyIndexFile, err)
	}
	ix.imported.Store(true)
	return nil
}

// importLegacy moves the records of the old log .hub/state.jsonl into
// the index, then renames the log state.jsonl.migrated. It runs under an
// exclusive lock, so that of several processes opening the root at once
// one imports and the others wait for it, then find no log; until the log
// is gone no process uses the index. A crash before the rename leaves the
// log, and the next process imports it again.
//
// Without locks on the filesystem, processes may import at once. The
// import is then idempotent: a valid record file is never replaced, and a
// process stops importing as soon as it finds the log gone (another one
// imported it all). Only a change made in the instant between that check
// and the next record written can be undone, by the old record.
func (ix *index) importLegacy() error {
	logName := filepath.Join(ix.hub, legacyIndexFile)
	if _, err := os.Lstat(logName); absent(err) {
		return nil
	} else if err != nil {
		return err
	}
	unlock, err := lockIndex(filepath.Join(ix.hub, indexLockFile))
	if err != nil {
		return err
	}
	defer unlock()
	recs, err := readLegacyLog(logName)
	if absent(err) {
		return nil // imported by another process while we waited
	}
	if err != nil {
		return err
	}
	// Each file is flushed on its own only where syncfs(2) cannot flush
	// them all at once.
	perFile := runtime.GOOS != "linux"
	for rel, rec := range recs {
		if _, err := os.Lstat(logName); absent(err) {
			// Another process finished the import meanwhile (possible only
			// without locks): it wrote every record, and may have changed
			// some since.
			return nil
		}
		name, _, err := ix.paths(rel)
		if err != nil {
			continue // no path of a root; the old index could not use it either
		}
		if _, err := readRecordFile(name); err == nil {
			continue // imported already, or since written anew
		}
		b, err := json.Marshal(indexLine{Path: rel, Record: &rec})
		if err != nil {
			return err
		}
		if err := ix.write(name, b, perFile); err != nil {
			return err
		}
	}
	if len(recs) > 0 {
		if perFile {
			err = ix.sync()
		} else if err = fsutil.SyncFS(ix.hub); err == nil {
			// Nothing else was written yet: every index operation waits
			// for the import.
			ix.mu.Lock()
			ix.dirty = nil
			ix.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	fault.Point("index.imported")
	if err := os.Rename(logName, filepath.Join(ix.hub, legacyImported)); err != nil && !absent(err) {
		return err
	}
	return fsutil.SyncDir(ix.hub)
}

// readLegacyLog replays the old log: the last line of a path wins.
func readLegacyLog(name string) (map[string]Record, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs := map[string]Record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxRecordSize)
	for sc.Scan() {
		var l indexLine
		// A torn last line from a crash is skipped: its change never
		// completed, so the previous record still stands.
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Path == "" {
			continue
		}
		if l.Record == nil {
			delete(recs, l.Path)
		} else {
			recs[l.Path] = *l.Record
		}
	}
	return recs, sc.Err()
}

// lockIndex takes the exclusive lock of the index, waiting at most
// importLockWait for another process holding it. Tests replace it.
var lockIndex = func(name string) (unlock func(), err error) {
	unlock, err = flockWithin(name, importLockWait, nil, nil)
	if errors.Is(err, errLockBusy) {
		return nil, fmt.Errorf("another process is importing %s; try again later", legacyIndexFile)
	}
	return unlock, err
}

// errLockBusy is flockWithin's error for a lock held longer than its wait.
var errLockBusy = errors.New("lock held by another process")

// flockWithin takes an exclusive flock of the file name (created if need
// be), waiting for another process or another descriptor of this one
// holding it at most wait (0: until done is closed, then failing with
// errLockBusy); waiting, if not nil, is called once when it finds the
// lock held. Where the filesystem has no locks (NFS without a lock
// daemon, some FUSE filesystems) it goes on unlocked, as fsutil does.
// Closing the file (unlock, or the process's end) releases the lock.
func flockWithin(name string, wait time.Duration, waiting func(), done <-chan struct{}) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return func() { _ = f.Close() }, nil // closing unlocks
		case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EINVAL):
			return func() { _ = f.Close() }, nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			_ = f.Close()
			return nil, err
		}
		if wait > 0 && time.Now().After(deadline) {
			_ = f.Close()
			return nil, errLockBusy
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-done:
			_ = f.Close()
			return nil, errLockBusy
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// empty tells whether the index holds no record (nor anything else).
func (ix *index) empty() bool {
	d, err := os.Open(ix.dir)
	if err != nil {
		return absent(err)
	}
	defer d.Close()
	names, _ := d.Readdirnames(1)
	return len(names) == 0
}

// each calls fn with every record of the index and the path it is kept
// at (a record file that cannot be read counts as unreadable: fn gets a
// nil record).
func (ix *index) each(fn func(rel string, rec *Record) error) error {
	if err := ix.ensureImported(); err != nil {
		return err
	}
	err := filepath.WalkDir(ix.dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			if absent(err) {
				return nil
			}
			return err
		case strings.HasPrefix(d.Name(), "."), d.IsDir():
			return nil // a writer's temporary file; a folder of records
		}
		l, err := readRecordFile(p)
		switch {
		case absent(err):
			return nil // removed since it was listed
		case err != nil || l.Record == nil:
			return fn(strings.TrimPrefix(p, ix.dir+"/"), nil)
		}
		return fn(l.Path, l.Record)
	})
	if err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	return nil
}
