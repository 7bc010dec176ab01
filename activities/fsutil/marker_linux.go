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

// exchangeMark is the marker's value on a temporary file about to be
// exchanged with the file at its destination (MarkExchange).
const exchangeMark = "exchange"

// MarkExchange marks f, a temporary file of the hub's, as about to be
// exchanged with the file at its destination (RENAME_EXCHANGE). A rerun
// after a kill finds it at the destination's name (Exchanged), and so
// tells it from a stored file that kept the plain marker of a writer
// killed just after its rename. Commit clears it with the plain one.
func MarkExchange(f *os.File) error {
	return unix.Fsetxattr(int(f.Fd()), tmpMarker, []byte(exchangeMark), 0)
}

// Exchanged reports whether f carries MarkExchange's marker.
func Exchanged(f *os.File) bool {
	buf := make([]byte, len(exchangeMark)+1)
	n, err := unix.Fgetxattr(int(f.Fd()), tmpMarker, buf)
	return err == nil && string(buf[:n]) == exchangeMark
}

// ClearMark removes the hub's marker from f, a file no longer temporary.
func ClearMark(f *os.File) { clearMarker(f) }
