//go:build !linux

package fsutil

// MountTables: where Linux lists its mounts; read nowhere else.
var MountTables = struct{ Fstab, Mountinfo string }{"/etc/fstab", "/proc/self/mountinfo"}

// UnmountedVolume finds nothing where the platform does not list its
// mounts.
func UnmountedVolume(string) string { return "" }

// MountPoints lists none where the platform does not list them.
func MountPoints() []string { return nil }
