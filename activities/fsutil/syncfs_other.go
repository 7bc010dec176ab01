//go:build !linux

package fsutil

// SyncFS falls back to syncing dir itself: without syncfs(2), the data of
// the files written is only as durable as the platform makes it.
func SyncFS(dir string) error { return SyncDir(dir) }
