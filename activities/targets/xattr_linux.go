package targets

import (
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func fsetxattr(f *os.File, name string, value []byte) error {
	return unix.Fsetxattr(int(f.Fd()), name, value, 0)
}

func getxattr(path, name string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// ctime is fi's status change time (Unix ns), which only the kernel sets.
func ctime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 1<<63 - 1 // unknown: never before a flush
}

// touch creates name if needed and sets its times to the filesystem's
// now (the server's, on NFS), which it returns.
func touch(name string) (time.Time, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, nil, 0); err != nil {
		return time.Time{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}
