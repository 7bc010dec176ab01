package site

import (
	"errors"
	"fmt"
	"os"
	"strings"
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
		case errors.Is(err, unix.ENAMETOOLONG) && len(rel) >= unix.PathMax:
			return openBeneathLong(dir, rel, flags, perm)
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

// longChunk is the most of a path openBeneathLong hands the kernel at
// once: the kernel takes no path of PATH_MAX bytes or more
// (ENAMETOOLONG), however deep a tree may go.
var longChunk = unix.PathMax - 96

// openBeneathLong is openBeneath for a path of PATH_MAX bytes or more
// (a user's tree nested deeper than the kernel names in one call; a
// reviewer's finding: such a tree failed every walk of the root). It
// resolves rel a chunk of whole components at a time, each chunk with
// openat2 beneath the folder the one before it opened, so no component is
// a symlink or "..", as in one call; only the folder each chunk reaches is
// held open, one at a time. The kernel checks each chunk beneath its own
// starting folder only, so once the last one is open the folder it was
// resolved in is checked to be beneath dir still: its ancestor as many
// levels up as rel has folders above the last chunk must be dir
// (otherwise a folder moved out of the root between two chunks could
// take the rest of the path outside it). Only paths the kernel refused
// come here: the usual open costs nothing more.
func openBeneathLong(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	cur, depth := dir, 0
	defer func() {
		if cur != dir {
			cur.Close()
		}
	}()
	rest := rel
	for len(rest) > longChunk {
		cut := strings.LastIndexByte(rest[:longChunk+1], '/')
		if cut <= 0 {
			return nil, beneathError(rel, unix.ENAMETOOLONG) // one name longer than any the kernel takes
		}
		next, err := openBeneath(cur, rest[:cut], oDirPath, 0)
		if err != nil {
			return nil, longError(rel, err)
		}
		if cur != dir {
			cur.Close()
		}
		cur, depth, rest = next, depth+strings.Count(rest[:cut], "/")+1, rest[cut+1:]
	}
	f, err := openBeneath(cur, rest, flags, perm)
	if err != nil {
		return nil, longError(rel, err)
	}
	if err := stillBeneath(dir, cur, depth); err != nil {
		f.Close()
		return nil, longError(rel, err)
	}
	return f, nil
}

// stillBeneath fails with ErrOutsideRoot unless dir is the folder depth
// levels above the open folder sub, found by ".." in runs the kernel
// takes in one call.
func stillBeneath(dir, sub *os.File, depth int) error {
	const run = unix.PathMax / 3 // "../" each
	fd, owned := int(sub.Fd()), false
	for depth > 0 {
		n := min(depth, run)
		up, err := unix.Openat(fd, strings.Repeat("../", n-1)+"..", oDirPath|unix.O_CLOEXEC, 0)
		if owned {
			unix.Close(fd)
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: "..", Err: err}
		}
		fd, owned, depth = up, true, depth-n
	}
	var got, want unix.Stat_t
	err := unix.Fstat(fd, &got)
	if owned {
		unix.Close(fd)
	}
	if err == nil {
		err = unix.Fstat(int(dir.Fd()), &want)
	}
	switch {
	case err != nil:
		return &os.PathError{Op: "stat", Path: "..", Err: err}
	case got.Dev != want.Dev || got.Ino != want.Ino:
		return ErrOutsideRoot
	}
	return nil
}

// longError names the whole path rel in a refusal about one of its chunks.
func longError(rel string, err error) error {
	var pe *os.PathError
	switch {
	case errors.Is(err, ErrSymlink):
		return beneathError(rel, unix.ELOOP)
	case errors.Is(err, ErrOutsideRoot):
		return beneathError(rel, unix.EXDEV)
	case errors.As(err, &pe):
		return beneathError(rel, pe.Err)
	}
	return err
}
