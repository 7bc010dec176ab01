//go:build !linux

package site

import (
	"io/fs"
	"os"
)

// walkNeedsAbs: entries are found by their full path.
const walkNeedsAbs = true

// statBuf is unused off Linux.
type statBuf struct{}

// lstatAt stats the entry by its full path without following a symlink;
// only Linux reads it relative to its folder.
func lstatAt(_ entryAt, abs string, _ *statBuf) (fs.FileInfo, error) { return os.Lstat(abs) }

// lgetxattrAt reads attribute attr of the entry by its full path.
func lgetxattrAt(_ entryAt, abs, attr string) ([]byte, error) { return lgetxattr(abs, attr) }
