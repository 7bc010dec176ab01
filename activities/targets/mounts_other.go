//go:build !linux

package targets

// mountsBeneath finds no mount points where the platform does not list
// them: a filesystem mounted inside the target folder is flushed once an
// object was written on it (see Filesystem.onDevice).
func mountsBeneath(string) []string { return nil }

// onNetworkFS: without a way to tell, every filesystem counts as local.
func onNetworkFS(string) bool { return false }
