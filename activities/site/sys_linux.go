package site

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/thehub/hub/activities/fsutil"
	"golang.org/x/sys/unix"
)

var (
	errNoAttr           = unix.ENODATA
	errXattrUnsupported = unix.EOPNOTSUPP
)

// xattrSupported probes with a read, so a read-only root is no problem:
// a filesystem with user xattrs answers "no such attribute".
func xattrSupported(dir string) bool {
	_, err := unix.Lgetxattr(dir, recordXattr, nil)
	return err == nil || errors.Is(err, unix.ENODATA)
}

func lgetxattr(path, name string) ([]byte, error) {
	return growing(func(buf []byte) (int, error) { return unix.Lgetxattr(path, name, buf) })
}

// fgetxattr is lgetxattr of the open file f.
func fgetxattr(f *os.File, name string) ([]byte, error) {
	return growing(func(buf []byte) (int, error) { return unix.Fgetxattr(int(f.Fd()), name, buf) })
}

// growing reads an attribute with get, into a larger buffer while it does
// not fit.
func growing(get func(buf []byte) (int, error)) ([]byte, error) {
	buf := make([]byte, 512)
	for {
		n, err := get(buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, normalizeXattrErr(err)
		}
		return buf[:n], nil
	}
}

func lsetxattr(path, name string, value []byte) error {
	return normalizeXattrErr(unix.Lsetxattr(path, name, value, 0))
}

func lremovexattr(path, name string) error {
	return normalizeXattrErr(unix.Lremovexattr(path, name))
}

// normalizeXattrErr folds the errno spellings of "not supported" into one.
func normalizeXattrErr(err error) error {
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return errXattrUnsupported
	}
	return err
}

// setMtime restores a file's mtime without touching its atime or
// following a symlink.
func setMtime(path string, mtime time.Time) error {
	ts := []unix.Timespec{
		{Sec: 0, Nsec: unix.UTIME_OMIT},
		unix.NsecToTimespec(mtime.UnixNano()),
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}

const openNoFollow = unix.O_NOFOLLOW

// setMtimeOf sets the mtime of the open file f (its atime unchanged).
func setMtimeOf(f *os.File, mtime time.Time) error {
	return setTimesOf(f, []unix.Timespec{{Sec: 0, Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())})
}

// setAtimeMtimeOf sets both the atime and the mtime of f to t, through
// its descriptor: a temporary file's name is in a user's folder, where its
// user may put a symlink to any file in its place.
func setAtimeMtimeOf(f *os.File, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return setTimesOf(f, []unix.Timespec{ts, ts})
}

func setTimesOf(f *os.File, ts []unix.Timespec) error {
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), ts, 0); err != nil {
		return &os.PathError{Op: "utimensat", Path: f.Name(), Err: err}
	}
	return nil
}

// birthTimeOf is birthTime of the file f is open on.
func birthTimeOf(f *os.File) int64 {
	var stx unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &stx); err != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// birthTime returns the creation time of path in Unix ns, or 0 when the
// filesystem does not record one.
func birthTime(path string) int64 {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// accessChangeTimes returns a file's access and status change times.
// changeTime is fi's change time in ns (0 where unknown).
func changeTime(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}

func accessChangeTimes(st *syscall.Stat_t) (atime, ctime time.Time) {
	return time.Unix(st.Atim.Sec, st.Atim.Nsec).UTC(), time.Unix(st.Ctim.Sec, st.Ctim.Nsec).UTC()
}

// errOpenElsewhere: another open file description of the file exists
// (another program, or another step, has it open), so its data is not
// released (a write through that descriptor after the truncation would
// land in a stub), nor is it removed by a replayed deletion.
var errOpenElsewhere = errors.New("the file is open in another program")

// exclusiveLease takes a write lease on f, opened for writing, before a
// migrate releases the file or a replayed deletion removes it: it fails
// with errOpenElsewhere while any other descriptor of the file is open,
// and, held, makes every other open of the file wait until f is closed.
// Where the kernel grants no lease (NFS and other filesystems without
// them, a file another user owns without CAP_LEASE, leases disabled), the
// caller goes on without one, as before leases were used. (A variable:
// tests stand in for such a kernel.)
var exclusiveLease = writeLease

func writeLease(f *os.File) error {
	// An open that lasts an instant (a reader's, or a descriptor a fork
	// holds until its exec closes it) is waited out: about 60 ms in all.
	for wait := time.Millisecond; ; wait *= 2 {
		_, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK)
		switch {
		case !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EBUSY):
			return nil
		case wait > 32*time.Millisecond:
			return errOpenElsewhere
		}
		time.Sleep(wait)
	}
}

// openPastLease opens for reading the file at name, which another
// program leases (a non-blocking open of it said EWOULDBLOCK), waiting
// for the lease's break as a plain open does. The file is reached first
// by an O_PATH descriptor, whose open waits for nothing (no lease, no
// FIFO's writer), and checked to be a regular file; then that very file
// is opened through /proc/self/fd (see openUserFile).
func openPastLease(name string) (*os.File, error) {
	fd, err := unix.Open(name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &os.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	flag := unix.O_RDONLY | unix.O_CLOEXEC | fsutil.NoAtime
	for {
		rfd, err := unix.Open(fdName(fd), flag, 0)
		switch {
		case err == nil:
			return os.NewFile(uintptr(rfd), name), nil
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EPERM) && flag&fsutil.NoAtime != 0:
			flag &^= fsutil.NoAtime
		default:
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// leaseHeld tells whether f holds a write lease that no open of another
// program has broken (or started to break) since it was taken.
func leaseHeld(f *os.File) bool {
	t, err := unix.FcntlInt(f.Fd(), unix.F_GETLEASE, 0)
	return err == nil && t == unix.F_WRLCK
}

// dropCache drops the file's cached pages that are clean (on Linux, also
// those whose writeback failed), so that reads go to the disk.
func dropCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }

// byteLock takes an open file description write lock of the byte at off
// of f (F_OFD_SETLK), waiting up to a minute for another's to end: the
// holders are steps between a check and a record. Such locks are kept by
// the kernel for every process of the host, and an NFS client takes them
// on the server for every client. Where the filesystem takes no locks
// (ENOLCK: an NFS mount without its lock service), none is taken, as
// before these were used; the lock is then this process's alone. So with
// EINVAL and ENOSYS (a kernel before 3.15, a filter refusing the call), as
// with the state index's flock.
func byteLock(f *os.File, off int64) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: off, Len: 1}
	deadline := time.Now().Add(time.Minute)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil, errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
			return nil
		case !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES):
			return err
		case time.Now().After(deadline):
			return errors.New("another worker of the site has held the file's lock for a minute")
		}
		time.Sleep(wait)
	}
}

// byteUnlock ends byteLock's lock.
func byteUnlock(f *os.File, off int64) {
	_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_UNLCK, Start: off, Len: 1})
}

// hasCapabilities tells whether f carries file capabilities, which the
// kernel drops whenever the file is written or truncated.
func hasCapabilities(f *os.File) bool {
	b, err := fgetxattr(f, "security.capability")
	return err == nil && len(b) > 0
}
