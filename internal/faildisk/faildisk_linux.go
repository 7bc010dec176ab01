//go:build linux

// Package faildisk gives tests a disk that fails writes, for real: the
// kernel's writeback of the bytes a test wrote fails, as on a dying
// device, and every flush reports it as Linux does.
package faildisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// New mounts an ext4 filesystem (no journal) on a loop device
// whose backing file lies sparse on a small tmpfs: blocks the filesystem
// has written once are rewritten in place, new ones fail to reach the
// "disk" once the tmpfs is full, as on a failing device. full fills the
// tmpfs, and room empties it again.
func New(t *testing.T) (dir string, full, room func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a loop device needs root")
	}
	base := t.TempDir()
	backing, dir := filepath.Join(base, "backing"), filepath.Join(base, "mnt")
	require.NoError(t, os.Mkdir(backing, 0o755))
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, unix.Mount("tmpfs", backing, "tmpfs", 0, "size=32m"))
	t.Cleanup(func() { _ = unix.Unmount(backing, unix.MNT_DETACH) })
	img := filepath.Join(backing, "disk.img")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, 128<<20))
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
	out, err = exec.Command("mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=0", dev).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, unix.Mount(dev, dir, "ext4", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	filler := filepath.Join(backing, "filler")
	full = func() {
		f, err := os.Create(filler)
		require.NoError(t, err)
		defer f.Close()
		chunk := make([]byte, 1<<20)
		for {
			if _, err := f.Write(chunk); err != nil {
				require.True(t, errors.Is(err, unix.ENOSPC), "%v", err)
				return
			}
		}
	}
	room = func() { require.NoError(t, os.Remove(filler)) }
	return dir, full, room
}
