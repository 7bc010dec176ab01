package targets

import (
	"io/fs"
	"os"
	"strings"
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

// mtime is name's mtime (Unix ns): a stat without the allocations of
// os.Stat, for every Put.
func mtime(name string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		return 0, err
	}
	return st.Mtim.Nano(), nil
}

// touchAtime sets name's atime to the filesystem's now (the server's, on
// NFS), which it returns, and leaves its mtime.
func touchAtime(name string) (time.Time, error) {
	ts := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_OMIT}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, 0); err != nil {
		return time.Time{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		return time.Time{}, err
	}
	return time.Unix(st.Atim.Unix()), nil
}

// readBoot is this boot's id and start (the kernel's, in the clock that
// sets ctimes: a clock stepped since moves both alike).
func readBoot() boot {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return boot{}
	}
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return boot{}
	}
	// Uptime is whole seconds: a second more, so that no object of the
	// boot before falls after it.
	at := time.Now().Add(-time.Duration(info.Uptime) * time.Second).Add(time.Second)
	return boot{id: strings.TrimSpace(string(id)), at: at.UnixNano()}
}
