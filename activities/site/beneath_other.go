//go:build !linux

package site

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// openBeneath opens rel beneath dir. Without openat2 this checks each
// component for a symlink and then opens by name, which a rename between
// the two can defeat: on these systems run site workers as a service user
// (see docs/remote-copies.md).
func openBeneath(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	cur := dir.Name()
	if rel != "" {
		for _, name := range strings.Split(rel, "/") {
			if name == ".." {
				return nil, &symlinkError{path: apiPath(rel)}
			}
			cur = filepath.Join(cur, name)
			fi, err := os.Lstat(cur)
			if err != nil {
				return nil, &os.PathError{Op: "open", Path: apiPath(rel), Err: errors.Unwrap(err)}
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				return nil, &symlinkError{path: apiPath(rel)}
			}
		}
	}
	if flags&oDirPath == oDirPath {
		flags = os.O_RDONLY
	}
	return os.OpenFile(cur, flags|syscall.O_NOFOLLOW, fs.FileMode(perm))
}

func fdName(fd int) string { return "" }

// mkdirBeneath creates rel and its parents below dir.
func mkdirBeneath(dir *os.File, rel string, perm uint32) error {
	return os.MkdirAll(filepath.Join(dir.Name(), filepath.FromSlash(rel)), fs.FileMode(perm))
}

// oDirPath opens a folder only to resolve names inside it.
const oDirPath = syscall.O_DIRECTORY | 1<<30

func openRootDir(dir string) (*os.File, error) { return os.Open(dir) }

const oDirectory = syscall.O_DIRECTORY
