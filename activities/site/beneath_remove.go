//go:build unix

package site

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// unlinkBeneath removes the entry of l with one unlinkat in its pinned
// parent, never recursively: with dir false a file (or symlink), which
// fails if a folder was swapped in for it since it was checked; with dir
// true an empty folder, which fails if it holds anything (ENOTEMPTY) or is
// not a folder (ENOTDIR).
func unlinkBeneath(l *loc, dir bool) error {
	if l.name == "" {
		return fmt.Errorf("%q: the site root is never removed", apiPath(l.rel))
	}
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(fdOf(l.parent), l.name, flags); err != nil {
		return &os.PathError{Op: "remove", Path: apiPath(l.rel), Err: err}
	}
	return nil
}

// renameBeneath renames the entry of from to to, between their pinned
// parents. Unless replace, an entry at to is never replaced: the rename
// fails with EEXIST (fs.ErrExist), whatever appeared there since it was
// checked.
func renameBeneath(from, to *loc, replace bool) error {
	if from.name == "" || to.name == "" {
		return fmt.Errorf("%q: the site root is never moved", apiPath(from.rel))
	}
	var err error
	switch {
	case replace:
		err = unix.Renameat(fdOf(from.parent), from.name, fdOf(to.parent), to.name)
	default:
		err = renameNoReplace(fdOf(from.parent), from.name, fdOf(to.parent), to.name)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			err = renameCheckFirst(fdOf(from.parent), from.name, fdOf(to.parent), to.name)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: apiPath(from.rel), New: apiPath(to.rel), Err: err}
	}
	return nil
}

// renameCheckFirst is the rename without RENAME_NOREPLACE, for systems
// and filesystems that refuse the flag: it checks that newname is free,
// then renames. An entry created at newname in the instant between the
// two is replaced: the kernel offers no way to close that window there.
func renameCheckFirst(olddir int, oldname string, newdir int, newname string) error {
	switch _, err := fstatat(newdir, newname); {
	case err == nil:
		return unix.EEXIST
	case !errors.Is(err, unix.ENOENT):
		return err
	}
	return unix.Renameat(olddir, oldname, newdir, newname)
}
