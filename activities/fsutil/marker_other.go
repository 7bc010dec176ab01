//go:build !linux

package fsutil

import "os"

func setMarker(*os.File) error { return nil }

// Marked: without extended attributes, a plain single-link file under
// a temporary name is taken for the hub's own.
func Marked(*os.File) (marked, supported bool) { return false, false }

func clearMarker(*os.File) {}

// MarkExchange: nothing to mark without extended attributes (and no
// exchange either).
func MarkExchange(*os.File) error { return nil }

// Exchanged: never, without extended attributes.
func Exchanged(*os.File) bool { return false }

// ClearMark: nothing to clear.
func ClearMark(*os.File) {}

// ExchangedUntouched: never, without extended attributes.
func ExchangedUntouched(*os.File) bool { return false }

// LegacyExchanged: never, without extended attributes.
func LegacyExchanged(*os.File) bool { return false }
