package site

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// beneathResolve is what every path below a site root is opened with: no
// component may leave the root ("..", absolute symlinks, mount tricks) or
// be a symlink at all, and the kernel checks it as it walks, so nothing
// renamed meanwhile can redirect the open.
const beneathResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// noOpenat2 is set once openat2 is found missing (Linux before 5.6, or a
// seccomp filter refusing it); the fallback is then used.
var noOpenat2 atomic.Bool

// openBeneath opens rel (clean, relative, "" for dir itself) beneath the
// directory dir with flags; see beneathResolve.
func openBeneath(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_CLOEXEC
	how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(perm), Resolve: beneathResolve}
	for !noOpenat2.Load() {
		fd, err := unix.Openat2(int(dir.Fd()), rel, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), fdName(fd)), nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			// a rename raced the lookup: try again
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
		default:
			return nil, beneathError(rel, err)
		}
	}
	return openBeneathFallback(dir, rel, flags, perm)
}

// openBeneathFallback walks rel one component at a time, each opened
// relative to its parent's descriptor without following a symlink, which
// is what openat2 does in one call.
func openBeneathFallback(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	parts := strings.Split(rel, "/")
	cur := int(dir.Fd())
	owned := -1
	defer func() {
		if owned >= 0 {
			unix.Close(owned)
		}
	}()
	for i, name := range parts {
		if name == ".." {
			return nil, beneathError(rel, unix.EXDEV)
		}
		last := i == len(parts)-1
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags | unix.O_NOFOLLOW
		}
		fd, err := unix.Openat(cur, name, f, perm)
		if err != nil {
			// O_DIRECTORY on a symlink says ENOTDIR: name it a symlink, as
			// openat2 does.
			if errors.Is(err, unix.ENOTDIR) {
				if st, serr := fstatat(cur, name); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				}
			}
			return nil, beneathError(rel, err)
		}
		if owned >= 0 {
			unix.Close(owned)
		}
		owned, cur = fd, fd
	}
	owned = -1
	return os.NewFile(uintptr(cur), fdName(cur)), nil
}

func fstatat(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// fdName is a path through which the kernel reaches an open file by its
// descriptor, not by name: path-based calls on fdName(fd)+"/"+name act on
// name inside that very directory, whatever happened to its path since.
func fdName(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// beneathError turns the kernel's refusals into the package's errors.
func beneathError(rel string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return &symlinkError{path: apiPath(rel)}
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%q: %w", apiPath(rel), ErrOutsideRoot)
	}
	return &os.PathError{Op: "open", Path: apiPath(rel), Err: err}
}

// mkdirBeneath creates the folder rel and its missing parents beneath
// dir, never through a symlink.
func mkdirBeneath(dir *os.File, rel string, perm uint32) error {
	if rel == "" {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		d, err := openBeneath(dir, sub, oDirPath, 0)
		if err == nil {
			d.Close()
			continue
		}
		if !isNotExist(err) {
			return err
		}
		parent, err := openBeneath(dir, strings.Join(parts[:i], "/"), oDirPath, 0)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(parent.Fd()), parts[i], perm)
		parent.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return &os.PathError{Op: "mkdir", Path: apiPath(sub), Err: err}
		}
	}
	return nil
}

// oDirPath opens a folder only to resolve names inside it.
const oDirPath = unix.O_PATH | unix.O_DIRECTORY

// openRootDir opens the site root once, named by its descriptor so that
// every path built on it is reached through the descriptor.
func openRootDir(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), fdName(fd)), nil
}

const oDirectory = unix.O_DIRECTORY
