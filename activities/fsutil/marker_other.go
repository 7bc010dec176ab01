//go:build !linux

package fsutil

import "os"

func setMarker(*os.File) error { return nil }

// Marked: without extended attributes, a plain single-link file under
// a temporary name is taken for the hub's own.
func Marked(*os.File) (marked, supported bool) { return false, false }

func clearMarker(*os.File) {}
