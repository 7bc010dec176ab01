package fsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func setMarker(f *os.File) error { return unix.Fsetxattr(int(f.Fd()), tmpMarker, []byte("1"), 0) }

// hasMarker reports whether f carries the hub's marker and whether its
// filesystem keeps user extended attributes at all.
func hasMarker(f *os.File) (marked, supported bool) {
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
