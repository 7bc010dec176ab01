//go:build !linux

package fsutil

import "os"

// SyncFS falls back to syncing dir itself: without syncfs(2), the data of
// the files written is only as durable as the platform makes it.
func SyncFS(dir string) error { return SyncDir(dir) }

// SyncFSOf is SyncFS of the open folder d.
func SyncFSOf(d *os.File) error { return d.Sync() }
