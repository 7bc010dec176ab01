//go:build unix && !linux

package site

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel (clean, relative, "" for dir itself) beneath dir:
// without openat2, one component at a time (openBeneathFallback), the
// code Linux tests run as well.
func openBeneath(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	return openBeneathFallback(dir, rel, flags, perm)
}

// oDirPath opens a folder only to resolve names inside it (sysFlags maps
// it to a read-only open: these systems have no O_PATH).
const oDirPath = unix.O_DIRECTORY | 1<<30

// oSearch opens the folders a path goes through only to look names up.
const oSearch = unix.O_RDONLY

func sysFlags(flags int) int {
	if flags&oDirPath == oDirPath {
		return unix.O_RDONLY | unix.O_DIRECTORY
	}
	return flags
}

// newFileBeneath names a descriptor opened beneath dir by its path: these
// systems have no /proc/self/fd, so the operations that take a name
// (loc.path) use it by name, as before.
func newFileBeneath(fd int, dir *os.File, rel string) *os.File {
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), filepath.FromSlash(rel)))
}

func fdName(int) string { return "" }

func openRootDir(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

const oDirectory = unix.O_DIRECTORY

// oProbe opens anything, without following a final symlink or blocking on
// a FIFO, only to see that it is there.
const oProbe = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK
