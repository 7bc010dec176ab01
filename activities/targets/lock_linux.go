package targets

import "golang.org/x/sys/unix"

// recordLock takes an open file description lock (F_OFD_SETLK) on the
// whole of the lock file, beside its flock. The two kinds do not see each
// other on Linux: an NFS server takes the locks of its clients as record
// locks, so a process on the server host that took only an flock of the
// exported folder would run beside a client's, and one of an earlier
// version of the hub takes only the flock. Holding both keeps every one
// of them apart. It ends when the file is closed.
var recordLock = func(fd uintptr) error {
	return unix.FcntlFlock(fd, unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK})
}
