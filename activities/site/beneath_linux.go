package site

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
)

// beneathResolve is what every path below a site root is opened with: no
// component may leave the root ("..", absolute symlinks, mount tricks) or
// be a symlink at all, and the kernel checks it as it walks, so nothing
// renamed meanwhile can redirect the open.
const beneathResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// noOpenat2 is set once openat2 is found missing (Linux before 5.6, or a
// seccomp filter refusing it); the fallback is then used. Tests set it
// from the start to run the fallback (see beneath_fallback_test.go).
var noOpenat2 atomic.Bool

// openBeneath opens rel (clean, relative, "" for dir itself) beneath the
// directory dir with flags; see beneathResolve.
func openBeneath(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	flags |= unix.O_CLOEXEC
	// Reading a file or listing a folder keeps its access time (see
	// fsutil.NoAtime), unless the kernel refuses: then it opens as usual.
	if flags&(unix.O_ACCMODE|unix.O_PATH) == unix.O_RDONLY {
		flags |= fsutil.NoAtime
	}
	how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(perm), Resolve: beneathResolve}
	for !noOpenat2.Load() {
		fd, err := unix.Openat2(int(dir.Fd()), rel, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), fdName(fd)), nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			// a rename raced the lookup: try again
		case errors.Is(err, unix.EPERM) && how.Flags&fsutil.NoAtime != 0:
			how.Flags &^= fsutil.NoAtime
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
		default:
			return nil, beneathError(rel, err)
		}
	}
	f, err := openBeneathFallback(dir, rel, int(how.Flags), perm)
	if errors.Is(err, unix.EPERM) && how.Flags&fsutil.NoAtime != 0 {
		return openBeneathFallback(dir, rel, int(how.Flags&^fsutil.NoAtime), perm)
	}
	return f, err
}

// fdName is a path through which the kernel reaches an open file by its
// descriptor, not by name: path-based calls on fdName(fd)+"/"+name act on
// name inside that very directory, whatever happened to its path since.
func fdName(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

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

// oSearch opens the folders a path goes through only to look names up.
const oSearch = unix.O_PATH

// sysFlags maps the package's open flags to the kernel's (the same here).
func sysFlags(flags int) int { return flags }

// newFileBeneath names a descriptor opened beneath dir by the descriptor
// itself (see fdName).
func newFileBeneath(fd int, _ *os.File, _ string) *os.File {
	return os.NewFile(uintptr(fd), fdName(fd))
}

// oProbe opens anything, without following a final symlink, only to see
// that it is there.
const oProbe = unix.O_PATH | unix.O_NOFOLLOW
