//go:build !linux

package fsutil

import (
	"errors"
	"fmt"
	"os"
)

// ErrOtherMount: RemoveAllOnOneMount met a folder of another mount.
var ErrOtherMount = errors.New("a filesystem is mounted beneath it")

// RemoveAllOnOneMount is os.RemoveAll after a look at the mount table
// (see remove_linux.go for Linux's, which holds while the removal runs).
func RemoveAllOnOneMount(dir string) error {
	if m := MountedBeneath(dir); m != "" {
		return fmt.Errorf("%s: %w (at %s)", dir, ErrOtherMount, m)
	}
	return os.RemoveAll(dir)
}

// MountIDOf: no mount IDs here (see remove_linux.go).
func MountIDOf(string) (id, ino uint64, ok bool) { return 0, 0, false }
