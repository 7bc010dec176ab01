package fsutil

import (
	"errors"
	"fmt"
	"os"
	"strings"

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
// killed just after its rename. Commit clears it with the plain one. The
// mark records f's size and mtime, so that a rerun tells the download as
// it was written (ExchangedUntouched) from one a user wrote into since.
func MarkExchange(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	mark := fmt.Sprintf("%s:%d:%d", exchangeMark, fi.Size(), fi.ModTime().UnixNano())
	return unix.Fsetxattr(int(f.Fd()), tmpMarker, []byte(mark), 0)
}

// exchangeMarkOf is f's exchange mark, "" when it has none.
func exchangeMarkOf(f *os.File) string {
	buf := make([]byte, 64)
	n, err := unix.Fgetxattr(int(f.Fd()), tmpMarker, buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), exchangeMark) {
		return ""
	}
	return string(buf[:n])
}

// Exchanged reports whether f carries MarkExchange's marker (or that of
// an earlier version, without size and mtime).
func Exchanged(f *os.File) bool { return exchangeMarkOf(f) != "" }

// LegacyExchanged reports whether f carries the exchange mark of a
// version before marks recorded size and mtime.
func LegacyExchanged(f *os.File) bool { return exchangeMarkOf(f) == exchangeMark }

// ExchangedUntouched reports whether f carries MarkExchange's marker and
// still has the size and mtime it recorded: a download as it was written.
func ExchangedUntouched(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && exchangeMarkOf(f) == fmt.Sprintf("%s:%d:%d", exchangeMark, fi.Size(), fi.ModTime().UnixNano())
}

// ClearMark removes the hub's marker from f, a file no longer temporary.
func ClearMark(f *os.File) { clearMarker(f) }
