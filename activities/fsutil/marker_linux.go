package fsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func setMarker(f *os.File) error { return unix.Fsetxattr(int(f.Fd()), tmpMarker, []byte("1"), 0) }

// Marked reports whether f is a temporary file of the hub's not yet put
// in place (it carries the marker OpenTemp sets and Commit clears), and
// whether f's filesystem can tell at all (it keeps user extended
// attributes).
func Marked(f *os.File) (marked, supported bool) {
	_, err := unix.Fgetxattr(int(f.Fd()), tmpMarker, nil)
	switch {
	case err == nil:
		return true, true
	case errors.Is(err, unix.ENODATA):
		return false, true
	default: // ENOTSUP and the like
		return false, false
	}
}

func clearMarker(f *os.File) { _ = unix.Fremovexattr(int(f.Fd()), tmpMarker) }
