package targets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/internal/fault"
)

// sumXattr stores an object's sha256 with its size and mtime, as Put
// wrote it. Size and mtime let Stat notice that someone rewrote the file
// behind our back, in which case the sum is no longer trusted. The value
// is 48 bytes (sumValue), small enough for ext4 to keep in the inode of
// a file with 256-byte inodes: the text form objects written before had
// ("<sha256 hex> <size> <mtime ns>", 89 bytes and still read) took a
// block of its own, a second block for every small object.
const sumXattr = "user.hub.sha256"

// Filesystem is a Driver storing each object as a file under a folder.
type Filesystem struct {
	dir string
	// flushDir is dir, open since the driver was made: its flushes learn
	// of every writeback error since (fsutil.SyncFSOf).
	flushDir *os.File
	dev      uint64      // dir's filesystem
	opened   os.FileInfo // dir as opened (sameFolder)
	// mounts are folders on the filesystems mounted beneath dir, open
	// like flushDir, by device: a flush reaches each (syncfs flushes one
	// filesystem), whether this driver wrote there or another process
	// did, since the stamp speaks for every object.
	mu     sync.Mutex
	mounts map[uint64]*os.File
	// volumes are the mount points beneath dir when the driver was made.
	volumes []string
	// network: dir is on a filesystem other hosts write to (see
	// onNetworkFS). Another host's unflushed objects are then NotDurable,
	// this host's own are written through a flushed temporary name, and
	// its flushes are not stamped: its syncfs does not reach the server's
	// cache, which holds the other hosts' unflushed writes.
	network bool
	// flushedUpTo: what this driver wrote before it is known on disk (the
	// stamp's time when the driver was made, 0 if none; then the start of
	// its last flush that succeeded). A failed flush distrusts everything
	// changed since (see distrust). unflushable: a filesystem mounted
	// beneath dir could not be opened, so no flush of this driver is
	// stamped.
	flushedUpTo int64
	unflushable bool
}

// The flush stamp. An object's checksum attribute is written with its
// bytes, and neither is flushed at once (see Sync); a filesystem that does
// not write data before the metadata naming it (ext4 without a journal or
// with data=writeback, ext2) can come back from a crash with an object
// whose size and attribute are on disk and whose bytes are not. So Stat
// trusts the attribute only of an object last changed (ctime) before the
// last flush known to have ended, the stamp's mtime, and reports the
// others Unflushed; it reads the stamp after the object, so that a stamp
// lowered before the object was linked (stampBelow), by this process or
// another, is seen. Sync sets the stamp's atime to now (the filesystem's
// clock, which sets ctimes), reads it, flushes, and only then writes that
// time into the stamp's mtime, which therefore never names a flush that
// had not ended: after a crash it may be older than the last flush, never
// newer. A clock stepped back would give objects written since ctimes
// before the stamp: Put lowers the stamp, on disk, before such an object
// has a name (stampBelow).
const (
	flushedStamp = ".hub-flushed"
	// stampPrefix names it (and a stamp being made), which listings leave
	// out.
	stampPrefix = ".hub-flush"
	// stampEvery: a flush less than this after the stamped one is not
	// stamped: each stamp is a write more for the flush after it, which
	// the small flushes of short jobs would feel. Objects flushed by such
	// a flush are reported Unflushed until a later one is stamped.
	stampEvery = time.Second
)

// NewFilesystem returns a filesystem driver for cfg.MigrationTargetFolder
// (joined with cfg.Prefix), creating the folder if needed, unless a site
// that used it before finds it without its marker (cfg.Seen).
func NewFilesystem(cfg Config) (*Filesystem, error) {
	if cfg.MigrationTargetFolder == "" {
		return nil, errors.New("filesystem target: MigrationTargetFolder is empty")
	}
	prefix, err := cleanPrefix(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("filesystem target: %w", err)
	}
	dir, err := filepath.Abs(filepath.Join(cfg.MigrationTargetFolder, filepath.FromSlash(prefix)))
	if err != nil {
		return nil, fmt.Errorf("filesystem target: %w", err)
	}
	if cfg.Seen != "" {
		if err := checkMarker(dir, cfg.Seen); err != nil {
			return nil, err
		}
	} else if cfg.MustExist {
		if err := mustBeFolder(dir); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("filesystem target: %w", err)
	}
	// A folder named through a symlink (/archive -> /mnt/nfs/archive) is
	// the folder it names: links inside it are refused (lister.folder).
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("filesystem target: %w", err)
	}
	flushDir, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("filesystem target: %w", err)
	}
	fi, err := flushDir.Stat()
	if err != nil {
		return nil, fmt.Errorf("filesystem target: %w", err)
	}
	f := &Filesystem{dir: dir, flushDir: flushDir, dev: device(fi), opened: fi, mounts: map[uint64]*os.File{}, network: networkFS(dir)}
	f.flushedUpTo, _ = mtime(filepath.Join(dir, flushedStamp))
	for _, m := range mountsBeneath(dir) {
		// One that cannot be opened (another user's FUSE mount) cannot be
		// flushed: the driver works, and stamps nothing.
		f.unflushable = f.unflushable || f.addMount(m) != nil
		f.volumes = append(f.volumes, m)
	}
	return f, nil
}

func (f *Filesystem) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(f.dir, filepath.FromSlash(key)), nil
}

// Put writes an unnamed file (O_TMPFILE) in the destination's folder and
// links it into place once it is whole and carries its checksum
// attribute: a reader never sees a partial object, and a writer killed
// midway leaves nothing behind. Something already at key (an older copy,
// a damaged one, another writer's) is replaced whole through a temporary
// name instead (putNamed, which flushes its file before the rename), as
// is every object on a filesystem without unnamed files. It does not
// fsync a new object: see Sync.
func (f *Filesystem) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	dst, err := f.path(key)
	if err != nil {
		return err
	}
	if f.network {
		return f.putNamed(ctx, key, dst, r, size)
	}
	var tmp *os.File
	if err := inFolder(dst, func() (err error) { tmp, err = fsutil.OpenUnnamed(filepath.Dir(dst)); return err }); err != nil {
		return f.putNamed(ctx, key, dst, r, size)
	}
	defer tmp.Close()
	if err := f.onDevice(tmp); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	value, written, err := writeObject(ctx, tmp, r, size)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	// The attribute is set before the object has a name, so it is the
	// object's only one (sumXattr) and no reader sees the object without it.
	if fsetxattr(tmp, sumXattr, value) == nil {
		if err := f.stampBelow(written); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
	}
	fault.Point("put.written")
	err = fsutil.Link(tmp, dst)
	if errors.Is(err, fs.ErrExist) {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		return f.putNamed(ctx, key, dst, tmp, size)
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// putNamed is Put through a temporary file next to the destination
// (fsutil.OpenTemp), renamed into place, which replaces whatever is there.
func (f *Filesystem) putNamed(ctx context.Context, key, dst string, r io.Reader, size int64) error {
	var tmp *os.File
	if err := inFolder(dst, func() (err error) { tmp, err = fsutil.OpenTemp(ctx, dst); return err }); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	err := f.onDevice(tmp)
	var value []byte
	if err == nil {
		value, _, err = writeObject(ctx, tmp, r, size)
	}
	if err == nil {
		// The rename may replace an object that stubs of this site or
		// another rely on, flushed long ago (or one that appears while
		// this is written): the new bytes reach the disk first. Else a
		// power cut after the filesystem committed the rename but not
		// the data (XFS orders nothing between them) leaves an empty
		// object where a whole one was.
		err = syncBeforeRename(tmp)
		value = append(value, flushedFirst) // and so it need not wait for a stamp
	}
	if err != nil {
		fsutil.Discard(tmp)
		return fmt.Errorf("put %s: %w", key, err)
	}
	// A missing sum only costs a re-read on verification, so xattr errors
	// (filesystems without user xattrs) and a kill before it is set are
	// not fatal. Set once the object is in place and unmarked: the only
	// attribute it has (sumXattr).
	if err := fsutil.CommitThen(tmp, dst, func(f *os.File) { _ = fsetxattr(f, sumXattr, value) }); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// syncBeforeRename is (*os.File).Sync; a test sees when it runs.
var syncBeforeRename = (*os.File).Sync

// writeObject copies r to w, checking its length against size (unless
// negative) and, for a ChecksummedReader, its sha256; it answers w's
// sumXattr value and its ctime once written.
func writeObject(ctx context.Context, w *os.File, r io.Reader, size int64) (value []byte, written int64, err error) {
	h := sha256.New()
	n, err := copyBuffer(io.MultiWriter(w, h), ctxReader{ctx, r})
	if err != nil {
		return nil, 0, err
	}
	if size >= 0 && n != size {
		return nil, 0, fmt.Errorf("read %d bytes, expected %d", n, size)
	}
	raw := h.Sum(nil)
	if cr, ok := r.(*ChecksummedReader); ok && cr.Sum != "" && cr.Sum != hex.EncodeToString(raw) {
		return nil, 0, fmt.Errorf("content sha256 %s does not match the expected %s", hex.EncodeToString(raw), cr.Sum)
	}
	fi, err := w.Stat()
	if err != nil {
		return nil, 0, err
	}
	return sumValue(raw, fi.Size(), fi.ModTime()), ctime(fi), nil
}

// Create writes a new file at key in place: one create, one write. It
// fails when anything (a file, a link, a folder) is already at key.
func (f *Filesystem) Create(ctx context.Context, key string, data []byte) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := f.volumeThere(filepath.Dir(p)); err != nil {
		return err // before the name is made
	}
	var file *os.File
	err = inFolder(p, func() (err error) {
		file, err = fsutil.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		return err
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	fault.Point("create.opened")
	if err = f.onDevice(file); err == nil {
		_, err = file.Write(data)
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	return nil
}

// NewGroup starts a body for markers (Grouper): an unnamed file in the
// target's folder, which each Add names with a hard link. Where the
// filesystem cannot make unnamed files it fails, and markers are created
// one by one (Create).
func (f *Filesystem) NewGroup(ctx context.Context) (Group, error) {
	file, err := fsutil.OpenUnnamed(f.dir)
	if err != nil {
		return nil, err
	}
	if err := f.onDevice(file); err != nil {
		file.Close()
		return nil, err
	}
	return &fsGroup{fs: f, file: file}, nil
}

type fsGroup struct {
	fs   *Filesystem
	file *os.File
	n    int
}

func (g *fsGroup) Add(ctx context.Context, key string, line []byte) error {
	p, err := g.fs.path(key)
	if err != nil {
		return err
	}
	if _, err := g.file.Write(line); err != nil {
		return fmt.Errorf("add %s: %w", key, err)
	}
	g.n++
	fault.Point("group.written")
	if err := g.fs.volumeThere(filepath.Dir(p)); err != nil {
		return err
	}
	if err := inFolder(p, func() error { return fsutil.Link(g.file, p) }); err != nil {
		return fmt.Errorf("add %s: %w", key, err)
	}
	return nil
}

func (g *fsGroup) Len() int { return g.n }

func (g *fsGroup) Close() error { return g.file.Close() }

// inFolder runs create, which makes a file or a name at p, and when p's
// folder does not exist yet, makes the folder and runs create again: the
// folder of a key (objects/<aa>/, refs/<aa>/) nearly always exists, so
// trying first saves a mkdir per file.
func inFolder(p string, create func() error) error {
	err := create()
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := mkdirs(filepath.Dir(p)); err != nil {
		return err
	}
	return create()
}

// mkdirs is os.MkdirAll for a folder that usually exists or whose parent
// does (a content's folder under refs/): one mkdir instead of MkdirAll's
// stat of the folder and of its parent first.
func mkdirs(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// sumValue is sumXattr's value: the sha256, then the size and the mtime
// in nanoseconds, each 8 bytes big-endian.
func sumValue(sum []byte, size int64, mtime time.Time) []byte {
	v := append(make([]byte, 0, sha256.Size+16), sum...)
	v = binary.BigEndian.AppendUint64(v, uint64(size))
	return binary.BigEndian.AppendUint64(v, uint64(mtime.UnixNano()))
}

// flushedFirst ends the sumXattr value of an object whose bytes were
// flushed (fsync) before it got its name: they are on disk whenever the
// attribute is there, stamp or no stamp.
const flushedFirst = 1

// sumOf reads a sumXattr value, in either form, and answers its sha256
// (hex) if the size and mtime it names are the file's, and whether the
// object's bytes were flushed before it was named (flushedFirst).
func sumOf(v []byte, fi fs.FileInfo) (sum string, flushed bool) {
	if len(v) == sha256.Size+17 && v[len(v)-1] == flushedFirst {
		v, flushed = v[:len(v)-1], true
	}
	if len(v) == sha256.Size+16 {
		if bytes.Equal(v, sumValue(v[:sha256.Size], fi.Size(), fi.ModTime())) {
			return hex.EncodeToString(v[:sha256.Size]), flushed
		}
		return "", false
	}
	// The text form of objects written before.
	text := string(v)
	sum, _, _ = strings.Cut(text, " ")
	if len(sum) == 2*sha256.Size && text == sum+" "+strconv.FormatInt(fi.Size(), 10)+" "+strconv.FormatInt(fi.ModTime().UnixNano(), 10) {
		return sum, false
	}
	return "", false
}

// Get opens the object file.
func (f *Filesystem) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	file, err := fsutil.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, f.wrap("get", key, err)
	}
	fi, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return nil, f.wrap("get", key, err)
	}
	if !fi.Mode().IsRegular() {
		_ = file.Close()
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return file, nil
}

// Stat reports the checksum recorded by Put when the file still has the
// size and mtime it had then.
func (f *Filesystem) Stat(ctx context.Context, key string) (Object, error) {
	p, err := f.path(key)
	if err != nil {
		return Object{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Object{}, f.wrap("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Object{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	obj := Object{Key: key, Size: fi.Size(), Mtime: fi.ModTime()}
	if v, err := getxattr(p, sumXattr); err == nil {
		var flushed bool
		obj.Checksum, flushed = sumOf(v, fi)
		obj.Unflushed = obj.Checksum != "" && !flushed && !f.flushedBefore(ctime(fi))
		obj.NotDurable = obj.Unflushed && f.network
	}
	return obj, nil
}

// flushedBefore reports whether an object last changed at ctime (Unix ns)
// is known to be on disk (see flushedStamp).
func (f *Filesystem) flushedBefore(ctime int64) bool {
	stamp := filepath.Join(f.dir, flushedStamp)
	if stamped, err := mtime(stamp); err != nil || ctime >= stamped {
		return false
	}
	_, from, to, ok := stampBoot(stamp)
	return !ok || ctime < from || ctime >= to // in the window: maybe lost in a power cut
}

// stampBelow makes sure the stamp does not name a time after written, the
// ctime of an object with its bytes (it only grows with its attribute)
// and no name yet. It never does unless the clock was stepped back since
// the stamped flush (or this writer slept through a whole flush, which is
// harmless): then it lowers the stamp to the epoch, on disk before the
// object is linked, so that no crash leaves the object's unflushed bytes
// trusted. Until a later flush is stamped every object is read back.
func (f *Filesystem) stampBelow(written int64) error {
	stamp := filepath.Join(f.dir, flushedStamp)
	stamped, err := mtime(stamp)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && written >= stamped) {
		return nil // no stamp: nothing is trusted unread
	} else if err != nil {
		return fmt.Errorf("read the flush stamp: %w", err)
	}
	epoch := time.Unix(0, 0)
	if err := os.Chtimes(stamp, epoch, epoch); err != nil {
		return fmt.Errorf("lower the flush stamp: %w", err)
	}
	if err := fsutil.SyncDir(stamp); err != nil { // an fsync of the stamp
		return fmt.Errorf("lower the flush stamp: %w", err)
	}
	return nil
}

// Delete removes the object file; a directory at key counts as absent.
func (f *Filesystem) Delete(ctx context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if fi.IsDir() {
		return nil
	}
	if err := os.Remove(p); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// List reads the folders on the page's way, in key order, and stops one key
// past the page. Each folder it enters is read whole, so paging through a
// big folder re-reads it for every page: Each visits a prefix reading
// every folder once.
func (f *Filesystem) List(ctx context.Context, prefix, marker string, max int) ([]Object, string, error) {
	if max <= 0 {
		max = 1000
	}
	var keys []string
	err := f.walk(ctx, prefix, marker, func(key string) (bool, error) {
		keys = append(keys, key)
		return len(keys) > max, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list %q: %w", prefix, err)
	}
	next := ""
	if len(keys) > max {
		keys = keys[:max]
		next = keys[max-1]
	}
	objs := make([]Object, 0, len(keys))
	for _, k := range keys {
		o, ok, err := f.object(k)
		if err != nil {
			return nil, "", fmt.Errorf("list %q: %w", prefix, err)
		}
		if ok {
			objs = append(objs, o)
		}
	}
	return objs, next, nil
}

// Each calls fn for every object under prefix, in key order, as paging
// through List would, but reads each folder once: a page of List reads its
// folder whole (getdents has no order), so paging through a folder of n
// keys reads n²/1,000 entries.
func (f *Filesystem) Each(ctx context.Context, prefix string, fn func(Object) error) error {
	var fnErr error
	err := f.walk(ctx, prefix, "", func(key string) (bool, error) {
		o, ok, err := f.object(key)
		if err != nil || !ok {
			return false, err
		}
		fnErr = fn(o)
		return fnErr != nil, nil
	})
	if err != nil {
		return fmt.Errorf("list %q: %w", prefix, err)
	}
	return fnErr
}

// walk passes the keys under prefix after marker to emit, in key order,
// until emit says stop.
func (f *Filesystem) walk(ctx context.Context, prefix, marker string, emit func(key string) (stop bool, err error)) error {
	base := prefix[:strings.LastIndex(prefix, "/")+1]
	if base != "" {
		if err := checkKey(strings.TrimSuffix(base, "/")); err != nil {
			return err
		}
	}
	l := lister{dir: f.dir, prefix: prefix, marker: marker, emit: emit}
	return l.folder(ctx, base)
}

// object describes the file at key; ok is false when it was deleted since
// its folder was read.
func (f *Filesystem) object(key string) (o Object, ok bool, err error) {
	fi, err := os.Lstat(filepath.Join(f.dir, filepath.FromSlash(key)))
	if isNotFound(err) {
		return Object{}, false, nil
	}
	if err != nil {
		return Object{}, false, err
	}
	return Object{Key: key, Size: fi.Size(), Mtime: fi.ModTime()}, true, nil
}

// lister walks a filesystem target in key order, reading only the folders
// whose keys can match the prefix and sort after the marker, and passes
// each key to emit until emit says stop: a page costs the folders on its
// way, not the whole tree under the prefix.
type lister struct {
	dir, prefix, marker string
	emit                func(key string) (stop bool, err error)
	stopped             bool
}

// folder lists the keys of the folder rel ("" or ending in "/"). The keys
// in a subfolder "name/" sort as the string "name/" does among its
// siblings' names (no name holds a "/"), so visiting entries in that order
// yields keys in order.
func (l *lister) folder(ctx context.Context, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A symlink inside the target is refused, never skipped: writes
	// follow it, so a listing that left out what is behind it would have
	// the collector take referenced content for garbage.
	name := filepath.Join(l.dir, filepath.FromSlash(rel))
	d, err := fsutil.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil && isSymlink(name) { // ELOOP, or ENOTDIR with O_DIRECTORY
		return symlinkInTarget(l.dir, rel)
	}
	if isNotFound(err) || errors.Is(err, syscall.ENOTDIR) {
		return nil // no such folder (or removed since its parent was read)
	}
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	type entry struct {
		key string
		dir bool
	}
	list := make([]entry, 0, len(entries))
	for _, e := range entries {
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			return symlinkInTarget(l.dir, rel+e.Name())
		case e.IsDir():
			list = append(list, entry{rel + e.Name() + "/", true})
		case e.Type().IsRegular() && !strings.HasPrefix(e.Name(), fsutil.TmpPrefix) && !strings.HasPrefix(e.Name(), lockPrefix) &&
			!strings.HasPrefix(e.Name(), stampPrefix) && e.Name() != targetMarker:
			list = append(list, entry{rel + e.Name(), false})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].key < list[j].key })
	for _, e := range list {
		if !e.dir {
			if strings.HasPrefix(e.key, l.prefix) && e.key > l.marker {
				if l.stopped, err = l.emit(e.key); err != nil || l.stopped {
					return err
				}
			}
			continue
		}
		// Every key under e.key starts with it: skip the folder when none
		// can match the prefix or sort after the marker.
		if !strings.HasPrefix(e.key, l.prefix) && !strings.HasPrefix(l.prefix, e.key) {
			continue
		}
		if l.marker > e.key && !strings.HasPrefix(l.marker, e.key) {
			continue
		}
		if err := l.folder(ctx, e.key); err != nil || l.stopped {
			return err
		}
	}
	return nil
}

// ErrSymlinkInTarget: a listing of a filesystem target met a symlink.
var ErrSymlinkInTarget = errors.New("symlink inside the target: the hub does not list through links in a target (move the data there, or mount it)")

func isSymlink(name string) bool {
	fi, err := os.Lstat(name)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

func symlinkInTarget(dir, rel string) error {
	return fmt.Errorf("filesystem target %s: %s: %w", dir, strings.TrimSuffix(rel, "/"), ErrSymlinkInTarget)
}

// onDevice makes sure the filesystem the new object's file tmp is on is
// one a flush reaches: one mounted beneath dir since the driver was made
// is added, before the object's bytes are written (its descriptor then
// hears of their writeback errors).
func (f *Filesystem) onDevice(tmp *os.File) error {
	fi, err := tmp.Stat()
	if err != nil {
		return err
	}
	// dir's path must still lead to the folder the driver opened: its
	// volume unmounted under the driver (lazily), or another mounted over
	// it, would take objects hidden once the volume is back, their files
	// released.
	if err := f.sameFolder(); err != nil {
		return err
	}
	dev := device(fi)
	f.mu.Lock()
	_, known := f.mounts[dev]
	f.mu.Unlock()
	if err := f.volumeThere(filepath.Dir(tmp.Name())); err != nil {
		return err
	}
	if dev == f.dev || known {
		return nil
	}
	return f.addMount(filepath.Dir(tmp.Name())) // a filesystem mounted beneath dir
}

// volumeThere fails when folder is in a folder a volume was mounted at
// when the driver was made, and is not now: the volume would hide what is
// written there once it is back (a reviewer's finding: markers went there,
// and their content was collected).
func (f *Filesystem) volumeThere(folder string) error {
	for _, p := range f.volumes {
		if in, err := filepath.Rel(p, folder); err == nil && !strings.HasPrefix(in, "..") && !mountedAt(p) {
			return fmt.Errorf("filesystem target %s %w: the volume mounted at %s is not mounted now", f.dir, ErrTargetNotMounted, p)
		}
	}
	return nil
}

// mountedAt tells whether something is mounted at the folder p: its
// mount is not its parent's (true where mount IDs are unknown).
func mountedAt(p string) bool {
	id, _, ok := fsutil.MountIDOf(p)
	parent, _, pok := fsutil.MountIDOf(filepath.Dir(p))
	return !ok || !pok || id != parent
}

// sameFolder says whether dir's path still leads to the folder the driver
// opened.
func (f *Filesystem) sameFolder() error {
	if now, err := os.Stat(f.dir); err != nil || !os.SameFile(f.opened, now) {
		return fmt.Errorf("filesystem target %s %w: its path leads to another folder than when the step began", f.dir, ErrTargetNotMounted)
	}
	return nil
}

// mountsBeneath lists the mount points strictly below dir (real paths).
func mountsBeneath(dir string) []string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	var out []string
	for _, p := range fsutil.MountPoints() {
		if rel, err := filepath.Rel(dir, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			out = append(out, p)
		}
	}
	return out
}

// addMount opens the folder dir, on a filesystem mounted beneath the
// target folder, to be flushed with it.
func (f *Filesystem) addMount(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	fi, err := d.Stat()
	if err != nil {
		d.Close()
		return err
	}
	dev := device(fi)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mounts[dev]; ok || dev == f.dev {
		d.Close()
		return nil
	}
	f.mounts[dev] = d
	return nil
}

// flushAll flushes the target folder's filesystem and every one mounted
// beneath it that the driver knows of.
func (f *Filesystem) flushAll() error {
	f.mu.Lock()
	dirs := []*os.File{f.flushDir}
	for _, d := range f.mounts {
		dirs = append(dirs, d)
	}
	f.mu.Unlock()
	var errs []error
	for _, d := range dirs {
		if err := syncFS(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sync flushes the target filesystem once, which is far cheaper than an
// fsync per object when a batch of thousands of small files was written,
// and stamps the flush (see flushedStamp): every object changed before
// the time read just before the flush began is on disk once it ends (the
// filesystem's clock moves by ticks: one changed in the very tick the
// flush began counts as unflushed). A stamp that cannot be written only
// leaves objects reported Unflushed.
func (f *Filesystem) Sync(ctx context.Context) error {
	stamp := filepath.Join(f.dir, flushedStamp)
	start := time.Now() // before the clock's first reading
	began, stamping := f.flushBegins(stamp)
	fault.Point("target.flush-begun")
	if err := f.flushAll(); err != nil {
		// Some bytes written since the driver was made never reached the
		// disk, while their pages read back whole until the kernel drops
		// them: nothing changed since the last stamp is trusted again.
		if werr := f.distrust(stamp); werr != nil {
			err = errors.Join(err, fmt.Errorf("record the failed flush on its stamp: %w", werr))
		}
		return fmt.Errorf("sync %s: %w", f.dir, err)
	}
	f.mu.Lock()
	f.flushedUpTo = max(f.flushedUpTo, start.Add(-clockTick).UnixNano())
	f.mu.Unlock()
	fault.Point("target.flushed")
	if stamping {
		f.stamp(stamp, began, start)
	}
	return nil
}

// clockTick is more than a filesystem clock's step: a stamp names a time
// this much before its flush began.
const clockTick = 10 * time.Millisecond

// stamp writes into the stamp's mtime when a flush began: the clock's
// reading then or, if earlier, its reading now less the time since start
// (by the monotonic clock, from before the first reading to after this
// one), less a tick. A wall clock stepped back during the flush, which
// objects written meanwhile take their ctimes from, makes the second
// reading the earlier.
func (f *Filesystem) stamp(stamp string, began, start time.Time) {
	ended, err := readClock(stamp)
	if err != nil {
		return
	}
	took := time.Since(start)
	if ended.Add(-took).Before(began) {
		began = ended.Add(-took)
	}
	if f.enterBoot(stamp) != nil {
		return
	}
	_ = os.Chtimes(stamp, time.Time{}, began.Add(-clockTick))
}

// A power cut loses what the page cache held: an object written after
// the last stamped flush and before the cut can come back with its
// attribute and without its bytes, and a flush after the reboot (which
// writes out what the cache holds then) would stamp a time after its
// ctime. So the stamp names the boot its stamps were made in, and the
// first flush of another boot records, before it stamps, the window from
// the last stamp to that boot's start: an object last changed in it is
// never trusted unread. One window is kept; a later boot widens it.
//
// bootXattr, on the stamp: "<boot id> <window start> <window end>" (Unix
// ns, the end excluded).
const bootXattr = "user.hub.flush-boot"

// boot names this boot and when it began; tests stand in another.
type boot struct {
	id string
	at int64 // Unix ns
}

var thisBoot = sync.OnceValue(readBoot)

func stampBoot(stamp string) (id string, from, to int64, ok bool) {
	v, err := getxattr(stamp, bootXattr)
	if err != nil {
		return "", 0, 0, false
	}
	if _, err := fmt.Sscanf(string(v), "%s %d %d", &id, &from, &to); err != nil {
		return "", 0, math.MaxInt64, true // unreadable: nothing trusted before it is rewritten
	}
	return id, from, to, true
}

func bootValue(b boot, from, to int64) []byte {
	return fmt.Appendf(nil, "%s %d %d", b.id, from, to)
}

// enterBoot makes the stamp name this boot before a flush of it is
// stamped, recording first, where the stamp names another boot (or none:
// one an older hub made), the window of objects changed in it after its
// last stamp (see bootXattr).
func (f *Filesystem) enterBoot(stamp string) error {
	cur := thisBoot()
	return widenWindow(stamp, math.MaxInt64, cur.at, func(id string, _, _ int64) bool { return id == cur.id })
}

// distrust records that no object changed since this driver's last flush
// that succeeded (or the stamp it found when made; or the last stamp, if
// earlier), until now, is to be trusted unread: a flush failed, so some
// bytes written meanwhile never reached the disk. Not from the last stamp
// alone: a flush of another process that did not hear of the error may
// have stamped after them. The window is written even when the stamp
// names it already: that write may be among those that failed.
func (f *Filesystem) distrust(stamp string) error {
	f.mu.Lock()
	since := f.flushedUpTo
	f.mu.Unlock()
	return widenWindow(stamp, since, time.Now().Add(clockTick).UnixNano(), func(string, int64, int64) bool { return false })
}

// widenWindow makes the stamp name this boot with a window reaching from
// its last stamp (or since, or the window's start, if earlier) to until,
// unless done says the window it names is enough. Made durable before a
// stamp moves, under an flock of the stamp against other processes doing
// the same.
func widenWindow(stamp string, since, until int64, done func(id string, from, to int64) bool) error {
	cur := thisBoot()
	if cur.id == "" {
		return errors.New("this boot is not known")
	}
	if id, from, to, ok := stampBoot(stamp); ok && done(id, from, to) {
		return nil
	}
	s, err := os.Open(stamp)
	if err != nil {
		return err
	}
	defer s.Close() // and with it the flock
	if err := syscall.Flock(int(s.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	id, from, to, ok := stampBoot(stamp)
	if ok && done(id, from, to) {
		return nil // another process widened it meanwhile
	}
	fi, err := s.Stat()
	if err != nil {
		return err
	}
	last := min(fi.ModTime().UnixNano(), since)
	switch {
	case ok && to == math.MaxInt64: // unreadable: from the start
		from, to = 0, until
	case !ok || from >= to: // none yet
		from, to = last, until
	}
	if err := fsetxattr(s, bootXattr, bootValue(cur, min(from, last), max(to, until))); err != nil {
		return err
	}
	return s.Sync()
}

// networkFS tells whether a target folder is on a network filesystem;
// tests play one.
var networkFS = onNetworkFS

// syncFS flushes a target's filesystem; tests make it fail.
var syncFS = fsutil.SyncFSOf

// readClock reads the filesystem's clock through the stamp's atime
// (touchAtime); tests step it.
var readClock = touchAtime

// flushBegins sets the stamp's atime to now and reads it: the time a flush
// begins at. stamping is false when the stamp cannot be written, names
// a flush that began less than stampEvery ago, or the target is on a
// network filesystem or has a mount beneath it that cannot be flushed
// (see Filesystem.network, unflushable).
func (f *Filesystem) flushBegins(stamp string) (began time.Time, stamping bool) {
	if f.network || f.unflushable {
		return time.Time{}, false
	}
	fi, err := os.Stat(stamp)
	if errors.Is(err, fs.ErrNotExist) {
		if err = newStamp(stamp); err == nil {
			fi, err = os.Stat(stamp)
		}
	}
	if err != nil {
		return time.Time{}, false
	}
	if time.Since(fi.ModTime()) < stampEvery {
		return time.Time{}, false
	}
	began, err = readClock(stamp)
	return began, err == nil && began.After(fi.ModTime())
}

// newStamp makes the file name with the Unix epoch for its times, on disk
// before it has that name, so that no crash leaves it with the time it
// was made, which may come after flushes that had not ended. A stamp
// another process made meanwhile is kept.
func newStamp(name string) error {
	return linkNew(name, stampPrefix+"-new-", func(tmp *os.File) error {
		epoch := time.Unix(0, 0)
		if err := os.Chtimes(tmp.Name(), epoch, epoch); err != nil {
			return err
		}
		// Made in this boot, with no window: no object is trusted before a
		// flush stamps it.
		_ = fsetxattr(tmp, bootXattr, bootValue(thisBoot(), 0, 0))
		return nil
	})
}

// linkNew makes file name, unless it exists, from a temporary file in its
// folder (named tmpPrefix...) that fill writes and that is flushed, then
// linked into place: two makers at once agree on one file, and no crash
// leaves a partial one under name.
func linkNew(name, tmpPrefix string, fill func(tmp *os.File) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), tmpPrefix)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), name); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// lockPrefix names the lock files (TryLock), which listings leave out.
const lockPrefix = ".hub-lock-"

// flock is syscall.Flock (tests make it fail as a filesystem without
// locks does).
var flock = syscall.Flock

// TryLock takes an exclusive flock, and on a local filesystem a record
// lock (recordLock), of the file .hub-lock-<name> in the target folder. Where the filesystem
// cannot lock (NFS without a lock service), it fails: what the lock keeps
// apart must not run unlocked. The locks are held until release. The lock
// file is never removed: a process that found it gone would lock a new
// one beside the holder, so StillHeld(held) checks that the folder still
// names the file locked, and a holder stops (ErrLockLost) at the first
// step after someone removed or replaced it.
func (f *Filesystem) TryLock(ctx context.Context, name string) (held context.Context, release func(), err error) {
	if f.network && fsutil.LocksAreLocal(f.dir) {
		// flock succeeds there on each host alone (a reviewer's finding:
		// two hosts' collectors would run at once).
		return nil, nil, fmt.Errorf("lock %s: this filesystem's locks hold on its own host only (mounted nolock, or local_lock=flock or all): mount it with locking to collect it", name)
	}
	path := filepath.Join(f.dir, lockPrefix+name)
	lf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: %w", name, err)
	}
	// A lock held for an instant (a descriptor a fork of this process
	// holds until its exec closes it) is waited out: about 130 ms in all.
	for wait := time.Millisecond; ; wait *= 2 {
		err = flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil && !f.network {
			err = recordLock(lf.Fd())
		}
		if !locked(err) || wait > 64*time.Millisecond {
			break
		}
		time.Sleep(wait)
	}
	check := func() error {
		mine, err := lf.Stat()
		if err != nil {
			return fmt.Errorf("lock %s: %w", name, err)
		}
		if now, err := os.Stat(path); err != nil || !os.SameFile(mine, now) {
			return fmt.Errorf("lock %s: %w: its file %s was removed or replaced while it was held (never remove a lock file: the lock ends with the process that holds it)", name, ErrLockLost, path)
		}
		return nil
	}
	if err == nil {
		if err = check(); err != nil {
			_ = lf.Close()
			return nil, nil, err
		}
	}
	switch {
	case err == nil:
		held, lose := holding(ctx, check)
		return held, func() { lose(nil); _ = lf.Close() }, nil
	case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EINVAL):
		// Without a lock (NFS mounted nolock), two collectors could run at
		// once: refused, never run unlocked.
		_ = lf.Close()
		return nil, nil, fmt.Errorf("lock %s: this filesystem takes no locks (%w): mount it with locking to collect it", name, err)
	case locked(err):
		_ = lf.Close()
		return nil, nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
	default:
		_ = lf.Close()
		return nil, nil, fmt.Errorf("lock %s: %w", name, err)
	}
}

// locked: a lock was refused because another holds it (flock says
// EWOULDBLOCK, a record lock EAGAIN or EACCES).
func locked(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES)
}

func (f *Filesystem) wrap(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// isNotFound also treats ENOTDIR as absence: "a/b" cannot exist when "a"
// is a file.
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// GetPinned is Get, with the file's identity as the pin.
func (f *Filesystem) GetPinned(ctx context.Context, key string) (io.ReadCloser, string, error) {
	rc, err := f.Get(ctx, key)
	if err != nil {
		return nil, "", err
	}
	fi, err := rc.(*os.File).Stat()
	if err != nil {
		_ = rc.Close()
		return nil, "", f.wrap("get", key, err)
	}
	return rc, filePin(fi), nil
}

// MovePinned renames the file at key to to, then checks that the file it
// moved is the one pinned: the rename is atomic, so the file pinned is
// taken away, or none is. A file put at key since the pin was taken (Put
// renames a new file into place) is renamed back, and ErrChanged; between
// the two renames key is absent, and a crash there leaves that file at to
// (the site's recall and scrub look for good content there).
func (f *Filesystem) MovePinned(ctx context.Context, key, to, pin string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	dst, err := f.path(to)
	if err != nil {
		return err
	}
	if pin == "" {
		return fmt.Errorf("move %s: no pin: %w", key, ErrChanged)
	}
	if err := mkdirs(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("move %s: %w", key, err)
	}
	if err := os.Rename(p, dst); err != nil {
		return f.wrap("move", key, err)
	}
	fault.Point("pinned.renamed")
	if fi, err := os.Lstat(dst); err == nil && filePin(fi) == pin {
		return nil
	}
	if err := os.Rename(dst, p); err != nil {
		return fmt.Errorf("move %s: it was rewritten since it was read, and the new file could not be put back from %s: %w", key, to, err)
	}
	return fmt.Errorf("move %s: %w", key, ErrChanged)
}

// device is the filesystem a file is on.
func device(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

// filePin names a file by its identity and the mtime and size it was
// written with: "" when the platform does not tell the inode.
func filePin(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, fi.ModTime().UnixNano(), fi.Size())
}
