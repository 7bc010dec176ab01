//go:build !linux

package targets

// recordLock: other systems have no open file description locks, and
// their flock is what NFS clients share.
var recordLock = func(uintptr) error { return nil }
