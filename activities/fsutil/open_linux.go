package fsutil

import (
	"os"
	"syscall"
)

// OpenFile is os.OpenFile for regular files on the hot paths of a step.
// os.OpenFile offers every file it opens to the runtime's poller, which a
// regular file always refuses: four system calls (two fcntl pairs and an
// epoll_ctl) of the dozen a small file's copy needs. This opens the file
// plainly and wraps it; reads and writes block, as they do on a regular
// file anyway.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
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
