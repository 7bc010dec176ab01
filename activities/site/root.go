// Package site implements the file operations a site worker performs on
// its storage: discovery (Walk, Snapdiff), the migration steps
// (Premigrate, Migrate, Recall, ReverseStub, Delete) and the helpers used
// by send and site_sync (CopyIn). Everything happens inside a
// Root; API paths are root-relative and can never reach outside it.
//
// The package is plain Go: the caller wraps these functions as Temporal
// activities, passing its context and a progress callback that it turns
// into heartbeats.
package site

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/thehub/hub/activities/fsutil"
)

// ErrOutsideRoot is returned (wrapped, with the offending path) when a
// path would leave the root, lexically or through symlinks.
var ErrOutsideRoot = errors.New("path leaves the site root")

// ErrReserved is returned (wrapped) for paths inside the root's private
// ".hub" folder.
var ErrReserved = errors.New("path is reserved for the hub")

// hubDir is the root-level folder holding the hub's own files (the state
// index). Walks skip it and API paths may not name it.
const hubDir = ".hub"

// tmpPrefix marks temporary files written next to their destination;
// walks and listings skip them.
const tmpPrefix = fsutil.TmpPrefix

// Root is a site's directory tree. It is safe for concurrent use.
type Root struct {
	dir string
	// f is the root folder, opened once: every path is opened beneath it
	// (see openBeneath), never resolved by name from "/".
	f *os.File
	// flushDir is the root folder open for flushes, since the root was
	// opened: they learn of every writeback error since (fsutil.SyncFSOf).
	flushDir *os.File
	dev      uint64 // the root's filesystem (device)
	state    *stateStore
	// mounts caches the mount points beneath the root (mountsBeneath).
	mounts struct {
		sync.Mutex
		list []string
		ids  map[uint64]string // mount ID → its entry of list
		from map[string]string // entry of list → what is mounted there (fsutil.Mount.From)
		root uint64            // the ID of the mount holding the root folder
		read time.Time
	}
	// locks is fileLockFile, opened at its first use (see lockFile).
	locks     *os.File
	locksOnce sync.Mutex
}

// RootOption configures NewRoot.
type RootOption func(*rootConfig)

type rootConfig struct {
	indexOnly bool
}

// WithIndexState keeps migration state in the per-site index even when
// the filesystem supports extended attributes.
func WithIndexState() RootOption {
	return func(c *rootConfig) { c.indexOnly = true }
}

// NewRoot opens the tree at dir, which must be an existing directory. It
// probes for user extended attributes to decide where migration state is
// kept (see StateBackend).
func NewRoot(dir string, opts ...RootOption) (*Root, error) {
	var cfg rootConfig
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", dir, err)
	}
	// Resolving the root itself once lets every containment check compare
	// real paths.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("site root %q: not a directory", dir)
	}
	f, err := openRootDir(real)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", dir, err)
	}
	flushDir, err := os.Open(real)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("site root %q: %w", dir, err)
	}
	useXattr := !cfg.indexOnly && xattrSupported(real)
	if !useXattr && hasFolderMarks(real) {
		f.Close()
		flushDir.Close()
		return nil, fmt.Errorf("site root %q: %w", dir, ErrXattrsUnreadable)
	}
	state := openStateStore(real, useXattr)
	state.root, state.dir = f, real
	return &Root{dir: real, f: f, flushDir: flushDir, dev: device(fi), state: state}, nil
}

// ErrRootMoved: the root's path no longer leads to the folder the worker
// opened (see Root.Check).
var ErrRootMoved = errors.New("the site root's path no longer leads to the folder this worker opened")

// Check says whether the root's path still leads to the folder opened at
// start. A volume unmounted lazily (umount -l) under a running worker, or
// one mounted over the root, leaves the worker's descriptors on one
// folder and the paths it names on another: nothing may run across the
// two until the worker is restarted or the volume comes back.
func (r *Root) Check() error {
	opened, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("site root %s: %w", r.dir, err)
	}
	now, err := os.Stat(r.dir)
	if err != nil {
		return fmt.Errorf("site root %s: %w: %w", r.dir, ErrRootMoved, err)
	}
	if !os.SameFile(opened, now) {
		return fmt.Errorf("site root %s: %w", r.dir, ErrRootMoved)
	}
	return nil
}

// Dir returns the root's absolute, symlink-free directory.
func (r *Root) Dir() string { return r.dir }

// StateBackend reports where migration state is kept: "xattr" (user.hub.*
// extended attributes on each file) or "index" (the .hub/state/ folder).
func (r *Root) StateBackend() string {
	if r.state.xattr {
		return "xattr"
	}
	return "index"
}

// ErrSymlink is returned (wrapped) for a path that goes through a
// symbolic link: the hub follows none below a site root, so no link, and
// no link swapped in while a step runs, can lead it elsewhere. Such paths
// also match ErrOutsideRoot, the class of paths a site refuses.
var ErrSymlink = errors.New("path goes through a symbolic link, which the hub does not follow")

type symlinkError struct{ path string }

func (e *symlinkError) Error() string { return fmt.Sprintf("%q: %v", e.path, ErrSymlink) }

func (e *symlinkError) Is(target error) bool { return target == ErrSymlink || target == ErrOutsideRoot }

// loc is a path beneath the root pinned to its open parent folder: the
// kernel reaches path() through the folder's descriptor, so renaming any
// folder above it, or swapping one for a symlink, cannot redirect an
// operation on it. Operations on path() must not follow a final symlink
// (lstat, O_NOFOLLOW, unlink, rename). Close it when done.
type loc struct {
	rel    string
	parent *os.File
	owned  bool   // parent is closed with the loc (not the root's own)
	name   string // "" for the root itself
}

func (l *loc) path() string {
	if l.name == "" {
		return l.parent.Name() + "/."
	}
	return l.parent.Name() + "/" + l.name
}

func (l *loc) close() {
	if l.owned {
		_ = l.parent.Close()
	}
}

// locate opens the parent of an API path beneath the root, refusing the
// .hub folder, paths that leave the root and paths through a symlink. A
// missing parent is fs.ErrNotExist.
func (r *Root) locate(p string) (*loc, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return nil, err
	}
	if rel == hubDir || strings.HasPrefix(rel, hubDir+"/") {
		return nil, fmt.Errorf("%q: %w", p, ErrReserved)
	}
	if rel == "" {
		return &loc{parent: r.f}, nil
	}
	dir, name := path.Split(rel)
	if dir == "" {
		return &loc{rel: rel, parent: r.f, name: name}, nil
	}
	d, err := openBeneath(r.f, strings.TrimSuffix(dir, "/"), oDirPath, 0)
	if err != nil {
		return nil, refusal(rel, err)
	}
	return &loc{rel: rel, parent: d, owned: true, name: name}, nil
}

// refusal names the whole path asked for in a refusal about one of its
// folders.
func refusal(rel string, err error) error {
	switch {
	case errors.Is(err, ErrSymlink):
		return &symlinkError{path: apiPath(rel)}
	case errors.Is(err, ErrOutsideRoot):
		return fmt.Errorf("%q: %w", apiPath(rel), ErrOutsideRoot)
	}
	return err
}

// locateCreating is locate for a path about to be written: its missing
// parent folders are created first, beneath the root.
func (r *Root) locateCreating(p string) (*loc, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return nil, err
	}
	if rel != hubDir && !strings.HasPrefix(rel, hubDir+"/") {
		if dir := path.Dir(rel); dir != "." {
			if err := r.mkdirAll(dir); err != nil {
				return nil, err
			}
		}
	}
	return r.locate(p)
}

// mkdirAll creates the folder rel (root-relative) and its parents beneath
// the root.
func (r *Root) mkdirAll(rel string) error { return mkdirBeneath(r.f, rel, 0o755) }

// Resolve maps an API path ("/projects/a.txt" or "projects/a.txt") to an
// absolute path inside the root, to be named in a configuration file (an
// export, a share) or a message. No component may be a symlink; missing
// components are allowed, the path may be about to be created. It is a
// check and a name, nothing more: unlike locate, it does not pin the
// folders it goes through, so nothing may act on the name it returns
// (a folder swapped for a symlink after the check would redirect it).
// Acting goes through descriptors: locate, openDir, checkDir, removeDir,
// moveToTrash, mkdirAll.
func (r *Root) Resolve(p string) (string, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return "", err
	}
	dir := rel
	for dir != "." && dir != "" {
		d, err := openBeneath(r.f, dir, oDirPath, 0)
		if err == nil {
			d.Close()
			break
		}
		if !isNotExist(err) {
			return "", refusal(rel, err)
		}
		dir = path.Dir(dir)
	}
	return filepath.Join(r.dir, filepath.FromSlash(rel)), nil
}

// cleanRel turns an API path into a clean relative slash path; "" is the
// root itself. ".." may not climb above the root.
func cleanRel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%q: invalid path", p)
	}
	c := path.Clean(strings.TrimLeft(p, "/"))
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q: %w", p, ErrOutsideRoot)
	}
	if strings.HasPrefix(path.Base(c), tmpPrefix) {
		return "", fmt.Errorf("%q: names starting with %s are reserved for the hub's temporary files", p, tmpPrefix)
	}
	return c, nil
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// apiPath turns a clean relative path into the "/a/b" form used in results.
func apiPath(rel string) string { return "/" + rel }

// isNotExist also treats ENOTDIR as absence: "a/b" cannot exist when "a"
// is a file.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
