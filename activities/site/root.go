// Package site implements the file operations a site worker performs on
// its storage: discovery (Walk, Snapdiff), the migration steps
// (Premigrate, Migrate, Recall, ReverseStub, Delete) and the helpers used
// by send and site_sync (CopyIn, RemovePath). Everything happens inside a
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
	"syscall"

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

// maxLinks bounds symlink resolution, like the kernel's ELOOP limit.
const maxLinks = 40

// Root is a site's directory tree. It is safe for concurrent use.
type Root struct {
	dir   string
	state *stateStore
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
	return &Root{dir: real, state: openStateStore(real, !cfg.indexOnly && xattrSupported(real))}, nil
}

// Dir returns the root's absolute, symlink-free directory.
func (r *Root) Dir() string { return r.dir }

// StateBackend reports where migration state is kept: "xattr" (user.hub.*
// extended attributes on each file) or "index" (the .hub/state.jsonl file).
func (r *Root) StateBackend() string {
	if r.state.xattr {
		return "xattr"
	}
	return "index"
}

// Resolve maps an API path ("/projects/a.txt" or "projects/a.txt") to an
// absolute path inside the root, following symlinks, and refuses paths
// that end up outside the root. Missing trailing components are allowed
// (the path may be about to be created).
func (r *Root) Resolve(p string) (string, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return "", err
	}
	return r.follow(p, rel, true)
}

// resolve is Resolve without following a final symlink, for operations
// on the link itself (lstat, delete, rename onto it). It returns the
// clean root-relative path too and refuses the .hub folder.
func (r *Root) resolve(p string) (rel, abs string, err error) {
	rel, err = cleanRel(p)
	if err != nil {
		return "", "", err
	}
	if rel == hubDir || strings.HasPrefix(rel, hubDir+"/") {
		return "", "", fmt.Errorf("%q: %w", p, ErrReserved)
	}
	abs, err = r.follow(p, rel, false)
	return rel, abs, err
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

// follow resolves rel component by component, like filepath.EvalSymlinks,
// but tolerates missing components and dangling links (whose targets may
// be created through them) and checks that the result is inside the root.
func (r *Root) follow(orig, rel string, followLast bool) (string, error) {
	cur := r.dir
	todo := splitPath(rel)
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		if len(todo) == 0 && !followLast {
			cur = next
			break
		}
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Nothing below a missing component can be a symlink.
				cur = filepath.Join(append([]string{next}, todo...)...)
				break
			}
			return "", fmt.Errorf("resolve %q: %w", orig, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("resolve %q: too many levels of symbolic links", orig)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", orig, err)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(splitPath(filepath.ToSlash(target)), todo...)
	}
	if !within(r.dir, cur) {
		return "", fmt.Errorf("%q: %w", orig, ErrOutsideRoot)
	}
	return cur, nil
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
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

func parentDir(abs string) string { return filepath.Dir(abs) }
