//go:build unix && !linux

package site

import "golang.org/x/sys/unix"

// renameNoReplace: these systems have no renameat2; renameBeneath falls
// back to renameCheckFirst.
func renameNoReplace(int, string, int, string) error { return unix.ENOSYS }

func renameExchange(*loc, *loc) error { return unix.ENOSYS }
