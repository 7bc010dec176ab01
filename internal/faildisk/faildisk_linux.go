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
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// New mounts an ext4 filesystem (no journal) on a loop device whose
// backing file lies on a tmpfs, with holes where the filesystem keeps
// data: its metadata blocks (bitmaps, inode tables, folders) are all
// written once and rewritten in place, while a data block written once
// the tmpfs is full fails to reach the "disk", as on a failing device.
// full fills the tmpfs, and room empties it again.
func New(t *testing.T) (dir string, full, room func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a loop device needs root")
	}
	base := t.TempDir()
	backing, dir := filepath.Join(base, "backing"), filepath.Join(base, "mnt")
	require.NoError(t, os.Mkdir(backing, 0o755))
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, unix.Mount("tmpfs", backing, "tmpfs", 0, "size=192m"))
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
	out, err = exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-O", "^has_journal", "-E", "lazy_itable_init=0", dev).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, unix.Mount(dev, dir, "ext4", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })

	// A file filling the filesystem initializes every group's metadata;
	// removed, it leaves the data blocks it had, which are then taken out
	// of the backing file.
	prep := filepath.Join(dir, "prep")
	f, err := os.Create(prep)
	require.NoError(t, err)
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, unix.ENOSPC)
			break
		}
	}
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	out, err = exec.Command("filefrag", "-e", "-b4096", prep).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var holes [][2]int64
	for _, m := range extentLine.FindAllStringSubmatch(string(out), -1) {
		from, _ := strconv.ParseInt(m[1], 10, 64)
		to, _ := strconv.ParseInt(m[2], 10, 64)
		holes = append(holes, [2]int64{from * 4096, (to - from + 1) * 4096})
	}
	require.NotEmpty(t, holes, "%s", out)
	require.NoError(t, os.Remove(prep))
	d, err := os.Open(dir)
	require.NoError(t, err)
	require.NoError(t, unix.Syncfs(int(d.Fd())))
	require.NoError(t, d.Close())
	b, err := os.OpenFile(img, os.O_RDWR, 0)
	require.NoError(t, err)
	for _, h := range holes {
		require.NoError(t, unix.Fallocate(int(b.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, h[0], h[1]))
	}
	require.NoError(t, b.Close())

	filler := filepath.Join(backing, "filler")
	full = func() {
		f, err := os.Create(filler)
		require.NoError(t, err)
		defer f.Close()
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

// extentLine is a line of filefrag -e: its physical start and end block.
var extentLine = regexp.MustCompile(`(?m)^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):`)
