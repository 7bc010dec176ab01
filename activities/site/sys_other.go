//go:build !linux

package site

import (
	"errors"
	"os"
	"syscall"
	"time"
)

var (
	errNoAttr           = errors.New("no such attribute")
	errXattrUnsupported = errors.New("extended attributes not supported on this platform")
)

func xattrSupported(string) bool { return false }

func lgetxattr(string, string) ([]byte, error) { return nil, errXattrUnsupported }

func fgetxattr(*os.File, string) ([]byte, error) { return nil, errXattrUnsupported }

func lsetxattr(string, string, []byte) error { return errXattrUnsupported }

func lremovexattr(string, string) error { return errXattrUnsupported }

func setMtime(path string, mtime time.Time) error { return os.Chtimes(path, time.Time{}, mtime) }

// setMtimeOf sets the mtime of f, by its name here.
func setMtimeOf(f *os.File, mtime time.Time) error { return os.Chtimes(f.Name(), time.Time{}, mtime) }

// setAtimeMtimeOf sets f's atime and mtime, by its name here.
func setAtimeMtimeOf(f *os.File, t time.Time) error { return os.Chtimes(f.Name(), t, t) }

// birthTimeOf is unknown without statx(2).
func birthTimeOf(*os.File) int64 { return 0 }

const openNoFollow = syscall.O_NOFOLLOW

// birthTime is unknown without statx(2).
func birthTime(string) int64 { return 0 }

// accessChangeTimes is unknown here: the Stat_t fields differ per platform.
func accessChangeTimes(*syscall.Stat_t) (atime, ctime time.Time) { return time.Time{}, time.Time{} }

// changeTime: unknown here (0); a release reads the content again.
func changeTime(os.FileInfo) int64 { return 0 }

var errOpenElsewhere = errors.New("the file is open in another program")

// exclusiveLease: no leases here; see sys_linux.go.
var exclusiveLease = func(*os.File) error { return nil }

// leaseHeld: no leases here.
func leaseHeld(*os.File) bool { return false }

// dropCache does nothing where the cache cannot be dropped.
func dropCache(*os.File) {}

// byteLock: the lock is this process's alone here (see sys_linux.go).
func byteLock(*os.File, int64) error { return nil }

// byteUnlock: see byteLock.
func byteUnlock(*os.File, int64) {}

func hasCapabilities(*os.File) bool { return false }

// openPastLease: these systems have no leases that an open waits for.
func openPastLease(name string) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EWOULDBLOCK}
}
