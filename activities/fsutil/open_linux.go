package fsutil

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenFile is os.OpenFile for regular files on the hot paths of a step.
// os.OpenFile offers every file it opens to the runtime's poller, which a
// regular file always refuses: four system calls (two fcntl pairs and an
// epoll_ctl) of the dozen a small file's copy needs. This opens the file
// plainly and wraps it; reads and writes block, as they do on a regular
// file anyway.
//
// A file opened only for reading keeps its access time (O_NOATIME; see
// NoAtime).
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	flag |= syscall.O_CLOEXEC
	if flag&syscall.O_ACCMODE == syscall.O_RDONLY {
		flag |= NoAtime
	}
	for {
		fd, err := syscall.Open(name, flag, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EPERM && flag&NoAtime != 0 {
			flag &^= NoAtime
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// NoAtime is added to the hub's opens of a user's file or folder for
// reading: its reading (a premigrate's copy, a checksum, a snapshot, a
// walk listing a folder) is not the users' access, and policies, search
// and analytics read the access time as theirs. Without it Linux sets the
// access time to now on the first read after a change or a day after the
// last one (relatime), so a premigrate of a file unread for a year made
// it look read today, and a policy releasing the space of files unread
// for 90 days never chose it. The kernel grants O_NOATIME to the file's
// owner and to root (CAP_FOWNER); for anyone else's file the open says
// EPERM and is made again without it.
const NoAtime = syscall.O_NOATIME

// openUnnamed makes an unnamed file in dir (see OpenScratch).
func openUnnamed(dir string) (*os.File, error) {
	for {
		fd, err := syscall.Open(dir, unix.O_TMPFILE|syscall.O_RDWR|syscall.O_CLOEXEC, 0o600)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open unnamed file in", Path: dir, Err: err}
		}
		return os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed)")), nil
	}
}

// OpenUnnamed makes an unnamed file in dir (O_TMPFILE) for Link to name:
// until then it is in no folder, and a crash leaves nothing behind.
func OpenUnnamed(dir string) (*os.File, error) { return openUnnamed(dir) }

// Link gives the open file f one more name, dst (a hard link), which
// f's filesystem makes without a new inode. f may be unnamed (OpenUnnamed).
// It fails, with fs.ErrExist, when anything is at dst already.
func Link(f *os.File, dst string) error {
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	for {
		err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.AT_SYMLINK_FOLLOW)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.LinkError{Op: "link", Old: f.Name(), New: dst, Err: err}
		}
		return nil
	}
}

// rename is os.Rename without its lstat of newname, which guards against
// renaming onto a folder: rename(2) of a file onto a folder fails on Linux
// by itself (EISDIR).
func rename(oldname, newname string) error {
	for {
		err := syscall.Rename(oldname, newname)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
		}
		return nil
	}
}

// renameNoReplace renames from to to, failing with EEXIST when to exists.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
