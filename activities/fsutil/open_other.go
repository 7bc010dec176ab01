//go:build !linux

package fsutil

import (
	"errors"
	"os"
)

// OpenFile is os.OpenFile (see open_linux.go for why Linux differs).
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// NoAtime is 0: only Linux is told not to change access times.
const NoAtime = 0

// openUnnamed: unnamed files are Linux's (O_TMPFILE); OpenScratch falls
// back to a named temporary file.
func openUnnamed(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// OpenUnnamed and Link are Linux's (see open_linux.go).
func OpenUnnamed(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// Link: see OpenUnnamed.
func Link(*os.File, string) error { return errors.ErrUnsupported }

func rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// renameNoReplace renames from to to unless to exists (checked first).
func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return os.ErrExist
	}
	return os.Rename(from, to)
}
