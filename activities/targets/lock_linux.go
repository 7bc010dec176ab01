package targets

import "golang.org/x/sys/unix"

// recordLock takes an open file description lock (F_OFD_SETLK) of the
// whole lock file, beside its flock, on a local filesystem. The two kinds
// do not see each other there: an NFS server (and Samba) takes the locks
// of its clients as record locks, so a process on the server host that
// took only an flock of the exported folder would run beside a client's,
// while one of an earlier version of the hub takes only the flock. Holding
// both keeps every one of them apart. On a network filesystem the flock
// already reaches the server (Linux sends it as a record lock), and a
// second lock of the same file from the same descriptor might conflict
// with it there (SMB), so none is taken. It ends when the file is closed.
var recordLock = func(fd uintptr) error {
	return unix.FcntlFlock(fd, unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK})
}
