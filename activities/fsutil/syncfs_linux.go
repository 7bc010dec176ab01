package fsutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// SyncFS flushes the filesystem holding dir with one syncfs(2), far
// cheaper than an fsync per file for a batch of many files. The
// descriptor is opened for the flush: it reports a writeback error only if
// no other descriptor's syncfs saw it first (see SyncFSOf).
func SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return SyncFSOf(d)
}

// SyncFSOf flushes the filesystem holding the open folder d. Linux reports
// a writeback error (bytes that never reached the disk) to the syncfs of
// every descriptor opened before it happened, and of one opened later only
// while nobody has seen it: a writer that keeps d open from before its
// writes until their flush learns of every error among them, also one
// another process's flush saw first.
func SyncFSOf(d *os.File) error { return unix.Syncfs(int(d.Fd())) }
