package fsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/internal/fault"
)

// ErrOtherMount: RemoveAllOnOneMount met a folder of another mount.
var ErrOtherMount = errors.New("a filesystem is mounted beneath it")

// RemoveAllOnOneMount removes dir and everything below it, as
// os.RemoveAll does, but never on another mount than dir's: every folder
// is opened (never through a symlink) and compared with dir by its mount
// (statx's mount ID, or its device where the kernel gives none) before
// anything in it is removed, and its entries are removed through that
// descriptor. A filesystem mounted beneath dir (a bind mount of shared
// data), even one mounted while the removal runs, is left whole, and the
// removal fails with ErrOtherMount. Folders are made writable first
// (snapshots are read-only).
func RemoveAllOnOneMount(dir string) error {
	top, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return os.Remove(dir) // a file or a symlink
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	mount, err := mountOf(top)
	if err == nil {
		// A filesystem mounted at dir itself is not dir's to empty.
		err = sameMountAsParent(top, dir, mount)
	}
	if err == nil {
		err = removeEntries(top, dir, mount)
	}
	unix.Close(top)
	if err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// sameMountAsParent fails with ErrOtherMount when the open folder top,
// named dir, of mount, is the root of a mount of its own.
func sameMountAsParent(top int, dir string, mount uint64) error {
	parent, err := unix.Openat(top, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Dir(dir), Err: err}
	}
	defer unix.Close(parent)
	if m, err := mountOf(parent); err != nil {
		return &os.PathError{Op: "statx", Path: filepath.Dir(dir), Err: err}
	} else if m != mount {
		return fmt.Errorf("%s: %w (at the folder itself)", dir, ErrOtherMount)
	}
	return nil
}

// mountOf names the mount of the open folder fd.
func mountOf(fd int) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		return stx.Mnt_id, nil
	}
	return 1<<63 | unix.Mkdev(stx.Dev_major, stx.Dev_minor), nil
}

// MountIDOf is the ID of the mount holding the file at path (a symlink
// itself, not what it names), as /proc/self/mountinfo's first field names
// it, and the file's inode number; ok is false where the path leads to
// nothing or the kernel gives no mount ID (before Linux 5.8). An
// automount point is not mounted by the look.
func MountIDOf(path string) (id, ino uint64, ok bool) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_MNT_ID|unix.STATX_INO, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, 0, false
	}
	return stx.Mnt_id, stx.Ino, true
}

// removeEntries removes everything in the open folder fd (named name, for
// messages), on mount alone. A folder another process removes meanwhile is
// removed; one whose names come back unremoved (gone at each try) fails
// rather than being read for ever.
func removeEntries(fd int, name string, mount uint64) error {
	writable := false
	var last []string // names of a pass that removed none
	for {
		names, err := readNames(fd)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil // removed by another
		case err != nil:
			return &os.PathError{Op: "readdir", Path: name, Err: err}
		case len(names) == 0:
			return nil
		}
		removed := 0
		for _, n := range names {
			gone, err := removeEntry(fd, filepath.Join(name, n), n, mount)
			if errors.Is(err, unix.EACCES) && !writable {
				// A read-only folder (a snapshot's): made writable by its
				// owner, keeping its other bits, only when needed.
				writable = true
				var st unix.Stat_t
				if unix.Fstat(fd, &st) == nil && unix.Fchmod(fd, st.Mode&0o7777|0o700) == nil {
					gone, err = removeEntry(fd, filepath.Join(name, n), n, mount)
				}
			}
			if err != nil {
				return err
			}
			if gone {
				removed++
			}
		}
		if removed == 0 && slices.Equal(names, last) {
			return &os.PathError{Op: "remove", Path: name, Err: unix.ENOTEMPTY}
		}
		if last = nil; removed == 0 {
			last = names
		}
	}
}

// removeEntry removes the entry n of the open folder fd; gone is false
// when it was not there (removed by another).
func removeEntry(fd int, path, n string, mount uint64) (gone bool, err error) {
	err = unix.Unlinkat(fd, n, 0)
	switch {
	case err == nil:
		fault.Point("remove.unlinked")
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case !errors.Is(err, unix.EISDIR): // Linux's answer for a folder
		return false, &os.PathError{Op: "unlink", Path: path, Err: err}
	}
	return true, removeFolder(fd, path, n, mount)
}

// removeFolder removes the folder n of the open folder fd with everything
// in it, on mount alone.
func removeFolder(fd int, path, n string, mount uint64) error {
	sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed by another
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(sub)
	if m, err := mountOf(sub); err != nil {
		return &os.PathError{Op: "statx", Path: path, Err: err}
	} else if m != mount {
		return fmt.Errorf("%s: %w", path, ErrOtherMount)
	}
	if err := removeEntries(sub, path, mount); err != nil {
		return err
	}
	// A filesystem mounted at n since it was opened makes this fail
	// (EBUSY): it stays.
	if err := unix.Unlinkat(fd, n, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	fault.Point("remove.unlinked")
	return nil
}

// readNames reads up to a few hundred names of the open folder fd, from
// its start.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), "")
	defer d.Close()
	if _, err := unix.Seek(dup, 0, io.SeekStart); err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(512)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}
